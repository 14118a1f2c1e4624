// The training batch loader on small generated splits: batches the same for a (seed, epoch) whatever the
// worker count, each epoch a permutation of the split, plain batches equal to the images and labels written,
// mosaic off in the close_mosaic epochs, an image that does not decode skipped and counted once, and the
// one-line errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/dataset/synth_dataset.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/train/train_loader.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using namespace lab::train;
using lab::test::contains;
using lab::test::ScratchDir;
using lab::test::write_file;
namespace fs = std::filesystem;

namespace {

constexpr int kSize = 64;

// `count` synthetic size x size images written as PNG (lossless) under dir/images, with their labels.
dataset::Split make_split(const fs::path& dir, int count, int size = kSize) {
  dataset::Split split;
  dataset::SynthOptions options;
  options.imgsz = size;
  options.seed = 3;
  fs::create_directories(dir / "images");
  for (int i = 0; i < count; ++i) {
    const dataset::SynthImage synth = dataset::synth_image(options, 0, i);
    dataset::Sample s;
    s.image = dir / "images" / ("im" + std::to_string(i) + ".png");
    write_image(synth.image, s.image);
    s.labels = synth.labels;
    s.label_file = dataset::LabelFile::boxes;
    split.samples.push_back(s);
  }
  split.report.images = split.report.labelled = size_t(count);
  return split;
}

// A sample whose image does not decode: a JPEG cut off half way, or (`garbage`) bytes after a JPEG marker.
void add_undecodable(dataset::Split& split, const fs::path& file, bool garbage = false) {
  if (garbage) {
    write_file(file, std::string("\xff\xd8\xff\xe0 not really a JPEG", 22));
  } else {
    const std::vector<uint8_t> jpeg = encode_image(Image(kSize, kSize, 90), file);
    write_file(file, std::string(jpeg.begin(), jpeg.begin() + long(jpeg.size() / 2)));
  }
  dataset::Sample s;
  s.image = file;
  s.label_file = dataset::LabelFile::missing;
  split.samples.push_back(s);
  ++split.report.images, ++split.report.missing;
}

std::vector<TrainBatch> epoch_batches(TrainLoader& loader, int epoch, int epochs) {
  loader.start_epoch(epoch, epochs);
  std::vector<TrainBatch> batches;
  while (std::optional<TrainBatch> b = loader.next()) batches.push_back(std::move(*b));
  return batches;
}

void check_same(const std::vector<TrainBatch>& a, const std::vector<TrainBatch>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].files == b[k].files);
    CHECK(a[k].pixels == b[k].pixels);
    REQUIRE(a[k].ground_truth.size() == b[k].ground_truth.size());
    for (size_t i = 0; i < a[k].ground_truth.size(); ++i) {
      REQUIRE(a[k].ground_truth[i].size() == b[k].ground_truth[i].size());
      for (size_t j = 0; j < a[k].ground_truth[i].size(); ++j) {
        const loss::GtBox &x = a[k].ground_truth[i][j], &y = b[k].ground_truth[i][j];
        CHECK((x.cls == y.cls && x.x1 == y.x1 && x.y1 == y.y1 && x.x2 == y.x2 && x.y2 == y.y2));
      }
    }
  }
}

// Whether image `i` of `batch` is exactly its file's pixels with the file's labels times the size (the
// loader's plain path at imgsz = the image size: no resize, no padding).
bool is_plain(const TrainBatch& batch, size_t i, const dataset::Split& split) {
  const auto sample = std::find_if(split.samples.begin(), split.samples.end(),
                                   [&](const dataset::Sample& s) { return s.image == batch.files[i]; });
  const Image image = decode_image(sample->image);
  const size_t bytes = size_t(kSize) * kSize * 3;
  if (!std::equal(image.rgb.begin(), image.rgb.end(), batch.pixels.begin() + long(i * bytes))) return false;
  const std::vector<float> planes = batch.planes();  // the network's input: the bytes / 255 in planes
  const size_t plane = bytes / 3;
  for (size_t p = 0; p < plane; ++p)
    for (size_t c = 0; c < 3; ++c)
      if (planes[i * bytes + c * plane + p] != float(image.rgb[p * 3 + c]) / 255.f) return false;
  const std::vector<loss::GtBox>& truth = batch.ground_truth[i];
  if (truth.size() != sample->labels.size()) return false;
  for (size_t j = 0; j < truth.size(); ++j) {
    const loss::YoloLabel& l = sample->labels[j];
    const double x1 = (l.cx - l.w / 2) * kSize, x2 = (l.cx + l.w / 2) * kSize;
    const double y1 = (l.cy - l.h / 2) * kSize, y2 = (l.cy + l.h / 2) * kSize;
    if (truth[j].cls != l.cls || std::abs(truth[j].x1 - x1) > 1e-9 || std::abs(truth[j].x2 - x2) > 1e-9 ||
        std::abs(truth[j].y1 - y1) > 1e-9 || std::abs(truth[j].y2 - y2) > 1e-9)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("train loader: the same (seed, epoch) gives the same batches whatever the workers",
          "[train_loader]") {
  ScratchDir dir("train-loader-determinism");
  const dataset::Split split = make_split(dir.path, 12);
  TrainLoader inline_loader(split, kSize, 5, AugmentSettings{}, 0, 7);
  TrainLoader one(split, kSize, 5, AugmentSettings{}, 1, 7);
  TrainLoader three(split, kSize, 5, AugmentSettings{}, 3, 7);
  CHECK(inline_loader.batches_per_epoch() == 3);
  for (const int epoch : {0, 1}) {
    const std::vector<TrainBatch> reference = epoch_batches(inline_loader, epoch, 20);
    REQUIRE(reference.size() == 3);
    CHECK(reference[0].batch == 5);
    CHECK(reference[2].batch == 2);
    CHECK(reference[0].pixels.size() == size_t(5 * 3 * kSize * kSize));
    CHECK(reference[0].images.empty());
    std::set<fs::path> files;
    for (const TrainBatch& b : reference) files.insert(b.files.begin(), b.files.end());
    CHECK(files.size() == 12);
    check_same(reference, epoch_batches(one, epoch, 20));
    check_same(reference, epoch_batches(three, epoch, 20));
  }
  // Another epoch or seed: another order.
  const std::vector<TrainBatch> e0 = epoch_batches(inline_loader, 0, 20),
                                e1 = epoch_batches(inline_loader, 1, 20);
  CHECK(e0[0].files != e1[0].files);
  TrainLoader other_seed(split, kSize, 5, AugmentSettings{}, 0, 8);
  CHECK(epoch_batches(other_seed, 0, 20)[0].files != e0[0].files);
  // An epoch restarted part way (work under way dropped) gives the batches of a fresh start.
  three.start_epoch(0, 20);
  REQUIRE(three.next());
  check_same(e0, epoch_batches(three, 0, 20));
}

TEST_CASE("train loader: without augmentation the batches are the images and labels as written",
          "[train_loader]") {
  ScratchDir dir("train-loader-plain");
  const dataset::Split split = make_split(dir.path, 7);
  TrainLoader loader(split, kSize, 3, AugmentSettings::none(), 2, 1);
  for (const TrainBatch& b : epoch_batches(loader, 0, 1)) {
    CHECK(b.height == kSize);
    CHECK(b.width == kSize);
    for (size_t i = 0; i < size_t(b.batch); ++i) CHECK(is_plain(b, i, split));
  }
  CHECK_FALSE(loader.next());
}

TEST_CASE("train loader: batches staged in the given memory, its blocks reused batch after batch",
          "[train_loader]") {
  ScratchDir dir("train-loader-staging");
  const dataset::Split split = make_split(dir.path, 7);
  TrainLoader plain(split, kSize, 3, AugmentSettings{}, 0, 5), staged(split, kSize, 3, AugmentSettings{}, 2, 5);
  std::vector<std::pair<const uint8_t*, size_t>> blocks;  // what the allocation function made
  std::mutex made;
  staged.stage_batches_in([&](size_t bytes) {
    std::lock_guard lock(made);
    HostBuffer b = HostBuffer::pageable(bytes);
    blocks.emplace_back(b.as<const uint8_t>(), bytes);
    return b;
  });
  const auto in_a_block = [&](const TrainBatch& b) {
    std::lock_guard lock(made);
    return std::any_of(blocks.begin(), blocks.end(), [&](const auto& block) {
      return b.pixels.data() >= block.first && b.pixels.data() + b.pixels.size() <= block.first + block.second;
    });
  };
  for (int epoch = 0; epoch < 3; ++epoch) {
    plain.start_epoch(epoch, 3);
    staged.start_epoch(epoch, 3);
    for (int k = 0; k < 3; ++k) {  // each batch dropped before the next: its block goes back to the loader
      const std::optional<TrainBatch> a = plain.next(), b = staged.next();
      REQUIRE(a);
      REQUIRE(b);
      CHECK(a->pixels == b->pixels);  // the same bytes, wherever they live
      CHECK(in_a_block(*b));
    }
  }
  // The workers run at most two batches ahead of the one held: three blocks serve nine batches.
  CHECK(blocks.size() <= 3);
  CHECK_THROWS_WITH(staged.stage_batches_in([](size_t bytes) { return HostBuffer::pageable(bytes); }),
                    Catch::Contains("before the first epoch"));
}

TEST_CASE("train loader: mosaic in the early epochs, none in the last close_mosaic ones", "[train_loader]") {
  ScratchDir dir("train-loader-close-mosaic");
  const dataset::Split split = make_split(dir.path, 6);
  AugmentSettings mosaic_only = AugmentSettings::none();
  mosaic_only.mosaic = 1;
  mosaic_only.close_mosaic = 2;
  TrainLoader loader(split, kSize, 6, mosaic_only, 2, 1);
  for (const int epoch : {0, 1}) {
    const TrainBatch b = epoch_batches(loader, epoch, 4).at(0);
    int plain = 0;
    for (size_t i = 0; i < 6; ++i) plain += is_plain(b, i, split);
    CHECK(plain == 0);
  }
  for (const int epoch : {2, 3}) {
    const TrainBatch b = epoch_batches(loader, epoch, 4).at(0);
    for (size_t i = 0; i < 6; ++i) CHECK(is_plain(b, i, split));
  }
}

TEST_CASE("train loader: a corrupt JPEG is skipped and counted once", "[train_loader]") {
  ScratchDir dir("train-loader-corrupt");
  dataset::Split split = make_split(dir.path, 5);
  add_undecodable(split, dir.path / "images" / "bad.jpg");
  for (const AugmentSettings& augment : {AugmentSettings::none(), AugmentSettings{}}) {
    TrainLoader loader(split, kSize, 4, augment, 2, 11);
    std::vector<std::string> warnings;
    loader.on_warning([&](const std::string& w) { warnings.push_back(w); });
    for (const int epoch : {0, 1}) {
      size_t images = 0;
      for (const TrainBatch& b : epoch_batches(loader, epoch, 20)) {
        images += size_t(b.batch);
        CHECK(b.files.size() == size_t(b.batch));
        CHECK(std::count(b.files.begin(), b.files.end(), dir.path / "images" / "bad.jpg") == 0);
      }
      CHECK(images == 5);
    }
    REQUIRE(warnings.size() == 1);
    CHECK(contains(warnings[0], "bad.jpg: cannot read image ("));
    CHECK(contains(warnings[0], "(corrupt: image skipped)"));
    CHECK(loader.report().corrupt == 1);
    CHECK(loader.report().missing == 0);
    CHECK(loader.report().summary() ==
          "6 images, 5 labelled, 0 background (0 no label file, 0 empty label files), 1 corrupt skipped");
  }
}

TEST_CASE("train loader: one-line errors for a split that does not decode and for bad arguments",
          "[train_loader]") {
  ScratchDir dir("train-loader-errors");
  dataset::Split bad;
  add_undecodable(bad, dir.path / "a.jpg");
  add_undecodable(bad, dir.path / "b.jpg", true);
  for (const int workers : {0, 2}) {
    TrainLoader loader(bad, kSize, 1, AugmentSettings{}, workers, 0);
    loader.start_epoch(0, 1);
    try {
      loader.next();
      FAIL("no error");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(contains(what, "none of the 2 images decodes"));
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  const dataset::Split good = make_split(dir.path, 1);
  CHECK_THROWS_WITH(TrainLoader(good, 0, 1, {}, 0, 0), "--imgsz 0: must be at least 1");
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 0, {}, 0, 0), "--batch 0: must be at least 1");
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 1, {}, -1, 0), "--workers -1: must be at least 0");
  CHECK_THROWS_AS(TrainLoader(dataset::Split{}, kSize, 1, {}, 0, 0), UsageError);
  AugmentSettings bad_scale, bad_degrees, bad_close;
  bad_scale.scale = 1.5;
  bad_degrees.degrees = -200;
  bad_close.close_mosaic = -1;
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 1, bad_scale, 0, 0), "--scale 1.5: must be in [0, 1]");
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 1, bad_degrees, 0, 0), "--degrees -200: must be in [-180, 180]");
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 1, bad_close, 0, 0), "--close-mosaic -1: must be at least 0");
  AugmentSettings not_a_number;
  not_a_number.hsv_v = std::nan("");
  CHECK_THROWS_WITH(TrainLoader(good, kSize, 1, not_a_number, 0, 0), "--hsv-v nan: must be in [0, 1]");
  TrainLoader not_started(good, kSize, 1, {}, 1, 0);
  CHECK_FALSE(not_started.next());
}
