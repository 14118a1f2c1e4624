// Placing the objects of a synthetic image, and writing the whole dataset atomically on worker threads.
#include "pipeline/dataset/synth_dataset.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"
#include "pipeline/atomic_file.hpp"

namespace lab::dataset {

namespace fs = std::filesystem;
namespace {

constexpr int kMaxObjects = 6;
constexpr int kPlacementTries = 20;
constexpr double kMaxHiddenShare = 0.5;  // of an object's box that later objects may cover

const char* const kSplitNames[2] = {"train", "val"};

// Which object is on top at each pixel of the image, by boxes: an object may be placed only where every
// earlier object keeps at least (1 - kMaxHiddenShare) of its box visible.
class BoxCover {
 public:
  explicit BoxCover(int size) : size_(size), top_(size_t(size) * size_t(size), -1) {}

  bool allows(const ShapeBox& box) const {
    std::vector<long> hidden(boxes_.size(), 0);
    for (int y = box.y; y < box.y + box.h; ++y)
      for (int x = box.x; x < box.x + box.w; ++x)
        if (const int owner = top_[size_t(y) * size_t(size_) + size_t(x)]; owner >= 0)
          ++hidden[size_t(owner)];
    for (size_t k = 0; k < boxes_.size(); ++k)
      if (double(visible_[k] - hidden[k]) < (1 - kMaxHiddenShare) * boxes_[k].w * boxes_[k].h) return false;
    return true;
  }

  void add(const ShapeBox& box) {
    for (int y = box.y; y < box.y + box.h; ++y)
      for (int x = box.x; x < box.x + box.w; ++x) {
        int& owner = top_[size_t(y) * size_t(size_) + size_t(x)];
        if (owner >= 0) --visible_[size_t(owner)];
        owner = int(boxes_.size());
      }
    boxes_.push_back(box);
    visible_.push_back(long(box.w) * box.h);
  }

 private:
  int size_;
  std::vector<int> top_;
  std::vector<ShapeBox> boxes_;
  std::vector<long> visible_;  // pixels of each box not covered by a later one
};

std::string image_stem(int index) {
  char name[16];
  std::snprintf(name, sizeof name, "%06d", index);
  return name;
}

void check_options(const SynthOptions& o) {
  const int shapes = int(shape_names().size());
  if (o.classes < 1 || o.classes > shapes)
    throw UsageError("--classes " + std::to_string(o.classes) + ": from 1 to " + std::to_string(shapes) +
                     " (one shape per class)");
  if (o.train < 0 || o.val < 0 || o.train + o.val == 0)
    throw UsageError("--train and --val: image counts >= 0, not both 0");
  if (o.imgsz < 32 || o.imgsz > 4096)
    throw UsageError("--imgsz " + std::to_string(o.imgsz) + ": from 32 to 4096");
}

// The folder name without a trailing separator ("out/" -> "out").
fs::path target_folder(const fs::path& out) {
  fs::path target = out.lexically_normal();
  if (!target.has_filename() && target.has_parent_path()) target = target.parent_path();
  return target;
}

void check_target(const fs::path& target) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target, ec);
  if (status.type() == fs::file_type::not_found) return;
  if (!fs::is_directory(status) || !fs::is_empty(target, ec))
    throw UsageError(printable_path(target) +
                     ": already exists (the dataset is written only to a new or empty "
                     "folder)");
}

std::string data_yaml(const SynthOptions& o, const fs::path& target) {
  std::string text = "# lab data synth --classes " + std::to_string(o.classes) + " --train " +
                     std::to_string(o.train) + " --val " + std::to_string(o.val) + " --imgsz " +
                     std::to_string(o.imgsz) + " --seed " + std::to_string(o.seed) + "\n";
  text += "path: " + fs::absolute(target).lexically_normal().string() + "\n";
  text += "train: images/train\nval: images/val\nnames:\n";
  for (int c = 0; c < o.classes; ++c)
    text += "  " + std::to_string(c) + ": " + shape_names()[size_t(c)] + "\n";
  return text;
}

// Writes every image of both splits into `folder` on o.threads threads; the first failure stops the others
// and is rethrown.
void write_images(const SynthOptions& o, const fs::path& folder) {
  struct Job {
    int split, index;
  };
  std::vector<Job> jobs;
  for (int split = 0; split < 2; ++split)
    for (int i = 0; i < (split == 0 ? o.train : o.val); ++i) jobs.push_back({split, i});
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (size_t j; !failed && (j = next++) < jobs.size();) {
      try {
        const SynthImage made = synth_image(o, jobs[j].split, jobs[j].index);
        const std::string split = kSplitNames[jobs[j].split], stem = image_stem(jobs[j].index);
        write_image(made.image, folder / "images" / split / (stem + ".jpg"));
        write_file_atomically(folder / "labels" / split / (stem + ".txt"), yolo_label_lines(made.labels));
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::max(1, o.threads); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

SynthImage synth_image(const SynthOptions& options, int split, int index) {
  SynthRandom random(options.seed * 0x100000001b3ULL ^ (uint64_t(split) << 40) ^ uint64_t(index));
  random.next();
  const int s = options.imgsz;
  SynthImage made{Image(s, s), {}};
  draw_background(made.image, random);
  BoxCover cover(s);
  const int objects = random.integer(1, kMaxObjects);
  for (int k = 0; k < objects; ++k) {
    const int cls = random.integer(0, options.classes - 1);
    const std::array<uint8_t, 3> colour = random.colour();
    for (int attempt = 0; attempt < kPlacementTries; ++attempt) {
      ShapeBox box;
      box.w = std::max(8, int(s * (0.08 + 0.32 * random.uniform())));
      box.h = std::clamp(int(box.w * (0.6 + random.uniform())), 8, s);
      box.x = random.integer(0, s - box.w);
      box.y = random.integer(0, s - box.h);
      if (!cover.allows(box)) continue;
      draw_shape(made.image, cls, box, colour);
      cover.add(box);
      made.labels.push_back(
          {cls, (box.x + box.w / 2.0) / s, (box.y + box.h / 2.0) / s, double(box.w) / s, double(box.h) / s});
      break;
    }
  }
  return made;
}

std::string yolo_label_lines(const std::vector<loss::YoloLabel>& labels) {
  std::string text;
  for (const loss::YoloLabel& l : labels) {
    char line[96];
    std::snprintf(line, sizeof line, "%d %.6f %.6f %.6f %.6f\n", l.cls, l.cx, l.cy, l.w, l.h);
    text += line;
  }
  return text;
}

void write_synth_dataset(const SynthOptions& options) {
  check_options(options);
  const fs::path target = target_folder(options.out);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw UsageError(printable_path(target) + ": cannot create the dataset (folder '" +
                     printable_path(parent) + "' does not exist)");
  check_target(target);
  remove_stale_temporaries(parent, R"(\..+\.synth-([0-9]+)-[0-9]+)", fs::file_type::directory);
  std::random_device entropy;
  const fs::path temporary = parent / ("." + target.filename().string() + ".synth-" +
                                       std::to_string(::getpid()) + "-" + std::to_string(entropy()));
  try {
    for (const char* kind : {"images", "labels"})
      for (const char* split : kSplitNames) fs::create_directories(temporary / kind / split);
    write_images(options, temporary);
    write_file_atomically(temporary / "data.yaml", data_yaml(options, target));
    check_target(target);
    if (fs::exists(target)) fs::remove(target);  // an empty folder, replaced by the dataset
    fs::rename(temporary, target);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temporary, ec);
    throw UsageError(printable_path(target) + ": cannot write the dataset (" + e.code().message() + ")");
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
}

}  // namespace lab::dataset
