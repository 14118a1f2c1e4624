// `lab detect`: YOLO26 on images: letterbox, forward (the CPU reference or our kernels), end-to-end top-k,
// boxes back in image pixels; annotated images into --out, optional YOLO label files and a JSON document,
// one summary line per image and the average stage times.
#include <iostream>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/batching.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/detect/tensor_dump.hpp"
#include "pipeline/detect/image_inputs.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/image/draw.hpp"
#include "pipeline/image/image.hpp"
#include "progress.hpp"

namespace lab {
namespace {

namespace fs = std::filesystem;

struct DetectOptions {
  std::vector<std::string> inputs;
  std::string model, backend = "auto", out = "runs/detect", json, dump;
  int imgsz = 640, batch = 1, max_det = 300;
  float conf = 0.25f;
  bool square = false, save_txt = false;
};

int checked_imgsz(int imgsz) {
  if (imgsz <= 0) throw UsageError("--imgsz " + std::to_string(imgsz) + ": must be positive");
  const int rounded = (imgsz + 31) / 32 * 32;
  if (rounded != imgsz)
    std::cerr << "lab: warning: --imgsz " << imgsz << " is not a multiple of 32, using " << rounded << "\n";
  return rounded;
}

std::string resolve_backend(const std::string& requested, std::string& note) {
  if (requested != "auto") return requested;
  if (cuda_device_present()) {
    note = " (auto: a CUDA device is present)";
    return "cuda";
  }
  note = " (auto: no CUDA device, so the CPU reference)";
  return "reference";
}

fs::path annotated_path(const fs::path& out_dir, const fs::path& file) {
  const std::string ext = file.extension().string();
  const bool keeps = ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".JPG" || ext == ".PNG";
  return out_dir / (keeps ? file.filename() : fs::path(file.stem().string() + ".jpg"));
}

// Decoded images waiting for their forward: consecutive images of one letterboxed shape, up to --batch.
struct PendingBatch {
  std::vector<Image> images;
  std::vector<std::string> files;
  LetterboxGeometry geometry;
};

class DetectRun {
 public:
  DetectRun(const DetectOptions& o, Detector& detector, fs::path out_dir)
      : o_(o), detector_(detector), out_dir_(std::move(out_dir)) {}

  void add(Image image, const std::string& file) {
    const LetterboxGeometry g = detector_.geometry_for(image);
    if (!pending_.images.empty() && !joins_batch(pending_.geometry, pending_.images.size(), g, o_.batch))
      flush();
    pending_.geometry = g;
    pending_.images.push_back(std::move(image));
    pending_.files.push_back(file);
  }

  void flush() {
    if (pending_.images.empty()) return;
    std::vector<const Image*> pointers;
    for (const Image& image : pending_.images) pointers.push_back(&image);
    std::vector<ImageDetections> batch = detector_.detect(pointers, pending_.files);
    if (!o_.dump.empty()) dump_network_tensors(detector_.network(), pending_.files, o_.dump);
    for (size_t i = 0; i < batch.size(); ++i) save(pending_.images[i], batch[i]);
    results_.insert(results_.end(), batch.begin(), batch.end());
    pending_ = {};
  }

  const std::vector<ImageDetections>& results() const { return results_; }

 private:
  void save(Image& image, const ImageDetections& r) {
    std::vector<BoxAnnotation> boxes;
    for (const Detection& d : r.detections) {
      char score[16];
      std::snprintf(score, sizeof score, "%.2f", d.score);
      boxes.push_back({d.x1, d.y1, d.x2, d.y2, d.class_id, d.name + " " + score});
    }
    draw_annotations(image, boxes);
    write_image(image, annotated_path(out_dir_, r.file));
    if (o_.save_txt)
      write_file_atomically(out_dir_ / "labels" / (fs::path(r.file).stem().string() + ".txt"),
                            yolo_label_text(r));
    std::cout << summary_line(r) << "\n" << std::flush;
  }

  const DetectOptions& o_;
  Detector& detector_;
  fs::path out_dir_;
  PendingBatch pending_;
  std::vector<ImageDetections> results_;
};

void run_detect(DetectOptions o, CliState& state) {
  o.imgsz = checked_imgsz(o.imgsz);
  if (!(o.conf >= 0 && o.conf <= 1))
    throw UsageError("--conf " + std::to_string(o.conf) + ": must be in [0, 1]");
  if (o.batch < 1) throw UsageError("--batch " + std::to_string(o.batch) + ": must be at least 1");
  if (o.max_det < 1) throw UsageError("--max-det " + std::to_string(o.max_det) + ": must be at least 1");

  std::vector<fs::path> files;
  bool any_folder = false;
  if (o.inputs.empty()) {
    files = sample_images();
    if (files.empty())
      throw UsageError("no images given, and no sample images found in the shared assets folder");
  } else {
    std::vector<fs::path> arguments(o.inputs.begin(), o.inputs.end());
    for (const fs::path& a : arguments) any_folder = any_folder || fs::is_directory(a);
    files = collect_images(arguments);
  }

  std::string backend_note;
  const std::string executor = resolve_backend(o.backend, backend_note);
  const ModelLocation model = locate_model(default_model_search(o.model));
  DetectorOptions options;
  options.imgsz = o.imgsz, options.rect = !o.square, options.conf = o.conf, options.max_det = o.max_det;
  Detector detector(Yolo26Model::from_checkpoint(load_checkpoint(model.path)), executor, state.context(),
                    options);
  std::cout << "model " << model.path.string() << " (" << model.origin << "), backend " << executor
            << backend_note << ", imgsz " << o.imgsz << (o.square ? " square" : " rect") << "\n";

  const fs::path out_dir = o.out;
  std::error_code ec;
  fs::create_directories(o.save_txt ? out_dir / "labels" : out_dir, ec);
  if (ec) throw UsageError("--out " + o.out + ": cannot create the folder (" + ec.message() + ")");

  DetectRun run(o, detector, out_dir);
  Progress progress(any_folder && files.size() > 1);
  size_t failed = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    progress.update(i, files.size(), files[i].filename().string());
    std::optional<Image> image;
    try {
      image = decode_image(files[i]);
    } catch (const UsageError& e) {
      progress.finish();
      std::cerr << "lab: " << e.what() << " (skipped)\n";
      ++failed;
      continue;
    }
    progress.finish();
    run.add(std::move(*image), files[i].string());
  }
  run.flush();
  progress.finish();

  const auto& results = run.results();
  if (!results.empty()) std::cout << speed_line(results) << "\n";
  std::cout << "Results saved to " << out_dir.string();
  if (o.save_txt) std::cout << ", " << results.size() << " label files in " << (out_dir / "labels").string();
  std::cout << "\n";
  if (!o.json.empty()) {
    write_file_atomically(o.json,
                          detections_json(model.path.string(), executor, o.imgsz, results).dump(2) + "\n");
    std::cout << "JSON written to " << o.json << "\n";
  }
  if (failed > 0) {
    std::cerr << "lab: " << failed << " of " << files.size() << " images could not be read\n";
    state.exit_code = 1;
  }
}

}  // namespace

void add_detect_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("detect",
                                 "Run YOLO26 on images or folders (default: the sample images of the shared "
                                 "assets); write annotated images, optional YOLO labels and JSON");
  auto o = std::make_shared<DetectOptions>();
  cmd->add_option("inputs", o->inputs, "Image files or folders (jpg, jpeg, png, bmp)");
  cmd->add_option("--model", o->model,
                  "Checkpoint (.pt or .safetensors); default: $LAB_MODEL, the shared assets, the user cache, "
                  "else a download of the official yolo26n.pt");
  cmd->add_option("--imgsz", o->imgsz, "Network input size (rounded up to a multiple of 32)")
      ->capture_default_str();
  cmd->add_option("--conf", o->conf, "Keep detections with a score above this")->capture_default_str();
  cmd->add_flag("--square", o->square, "Letterbox to imgsz x imgsz instead of the minimum rectangle");
  cmd->add_option("--batch", o->batch, "Images per forward (consecutive images of one letterboxed shape)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "auto (cuda when a GPU is present, else reference), cuda or cpu (our kernels), reference "
                  "(the plain C++ forward)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "reference"}))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Folder for the annotated images (and labels/)")->capture_default_str();
  cmd->add_option("--json", o->json, "Write the detections of every image to this JSON file");
  cmd->add_option("--dump", o->dump,
                  "Write every tensor of the network (input, layer00..layer22, head, attention maps, output) "
                  "to DIR/<image stem>.safetensors");
  cmd->add_flag("--save-txt", o->save_txt, "Write YOLO-format labels (class cx cy w h score) to OUT/labels");
  cmd->add_option("--max-det", o->max_det, "Rows of the end-to-end top-k")->capture_default_str();
  cmd->callback([&state, o] { run_detect(*o, state); });
}

}  // namespace lab
