// `lab detect`: YOLO26 on images: letterbox, forward (the CPU reference or our kernels), end-to-end top-k,
// boxes back in image pixels; annotated images into --out, optional YOLO label files and a JSON document,
// one summary line per image and the average stage times.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/batching.hpp"
#include "pipeline/detect/detect_stream.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/detect/tensor_dump.hpp"
#include "pipeline/detect/image_inputs.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/image/draw.hpp"
#include "pipeline/image/image.hpp"
#include "precision_option.hpp"
#include "progress.hpp"

namespace lab {
namespace {

namespace fs = std::filesystem;

struct DetectOptions {
  std::vector<std::string> inputs;
  std::string model, backend = "auto", out = "runs/detect", json, dump, precision = "fp32", devices = "0";
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

// Draws the detections on the image and writes it (and its label file); called from the save workers.
void save_annotated(const DetectOptions& o, const fs::path& out_dir, Image& image, const ImageDetections& r) {
  std::vector<BoxAnnotation> boxes;
  for (const Detection& d : r.detections) {
    char score[16];
    std::snprintf(score, sizeof score, "%.2f", d.score);
    boxes.push_back({d.x1, d.y1, d.x2, d.y2, d.class_id, d.name + " " + score});
  }
  draw_annotations(image, boxes);
  write_image(image, annotated_path(out_dir, r.file));
  if (o.save_txt)
    write_file_atomically(out_dir / "labels" / (fs::path(r.file).stem().string() + ".txt"),
                          yolo_label_text(r));
}

// --devices: "all" or comma-separated GPU ordinals for cuda (one forward worker per GPU); for cpu and
// reference each entry is one more forward worker on the host.
std::vector<int> parse_devices(const std::string& text, const std::string& executor) {
  if (text == "all") {
    if (executor != "cuda") return {0};
    std::vector<int> all{0};  // without a GPU the Detector reports that no device is available
    for (int i = 1; i < cuda_device_count(); ++i) all.push_back(i);
    return all;
  }
  const UsageError malformed("--devices " + text + ": expected 'all' or GPU ordinals like 0,1");
  if (text.empty() || text.back() == ',') throw malformed;
  std::vector<int> devices;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    size_t used = 0;
    int ordinal = -1;
    try {
      ordinal = std::stoi(item, &used);
    } catch (const std::exception&) {
    }
    if (item.empty() || used != item.size() || ordinal < 0) throw malformed;
    if (std::find(devices.begin(), devices.end(), ordinal) != devices.end())
      throw UsageError("--devices " + text + ": device " + item + " is named twice");
    devices.push_back(ordinal);
  }
  if (devices.empty()) throw malformed;
  return devices;
}

void run_detect(DetectOptions o, CliState& state) {
  o.imgsz = checked_imgsz(o.imgsz);
  if (!(o.conf >= 0 && o.conf <= 1))
    throw UsageError("--conf " + std::to_string(o.conf) + ": must be in [0, 1]");
  if (o.batch < 1) throw UsageError("--batch " + std::to_string(o.batch) + ": must be at least 1");
  if (o.max_det < 1) throw UsageError("--max-det " + std::to_string(o.max_det) + ": must be at least 1");
  const Precision precision = precision_option(o.precision);

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
  options.precision = precision;
  const std::vector<int> devices = parse_devices(o.devices, executor);
  const Yolo26Model network_model = Yolo26Model::from_checkpoint(load_checkpoint(model.path));
  const RuntimeContext context = state.context();
  std::cout << "model " << model.path.string() << " (" << model.origin << "), backend " << executor
            << backend_note << ", imgsz " << o.imgsz << (o.square ? " square" : " rect")
            << (precision == Precision::Fp32 ? "" : ", precision " + precision_name(precision))
            << (devices.size() > 1 ? ", " + std::to_string(devices.size()) + " forward workers" : "") << "\n";

  const fs::path out_dir = o.out;
  Progress progress(any_folder && files.size() > 1);
  size_t failed = 0;
  std::mutex dump_mutex;
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  DetectStreamOptions stream;
  stream.detector = options;
  stream.batch = o.batch;
  stream.forward_workers = int(devices.size());
  stream.decode_threads = stream.save_threads = int(std::max(1u, cores / 2));
  DetectStreamHooks hooks;
  hooks.make_detector = [&](int worker) {
    RuntimeContext device_context = context;
    device_context.options.device = devices[size_t(worker)];
    return std::make_unique<Detector>(network_model, executor, device_context, options);
  };
  const auto start = std::chrono::steady_clock::now();
  auto streaming = start;  // when every Detector exists
  hooks.started = [&] {
    streaming = std::chrono::steady_clock::now();
    std::error_code ec;
    fs::create_directories(o.save_txt ? out_dir / "labels" : out_dir, ec);
    if (ec) throw UsageError("--out " + o.out + ": cannot create the folder (" + ec.message() + ")");
  };
  if (!o.dump.empty())
    hooks.after_forward = [&](Detector& detector, const std::vector<std::string>& names) {
      std::lock_guard lock(dump_mutex);
      dump_network_tensors(detector.network(), names, o.dump);
    };
  hooks.save = [&](Image& image, const ImageDetections& r) { save_annotated(o, out_dir, image, r); };
  hooks.finished = [&](const ImageDetections& r) {
    progress.finish();
    std::cout << summary_line(r) << "\n" << std::flush;
  };
  hooks.skipped = [&](const std::string&, const std::string& error) {
    progress.finish();
    std::cerr << "lab: " << error << " (skipped)\n";
    ++failed;
  };
  hooks.progress = [&](size_t i, size_t total, const std::string& name) { progress.update(i, total, name); };
  const std::vector<ImageDetections> results = run_detect_stream(files, stream, hooks);
  const auto end = std::chrono::steady_clock::now();
  const double setup_s = std::chrono::duration<double>(streaming - start).count();
  const double seconds = std::chrono::duration<double>(end - streaming).count();
  progress.finish();

  if (!results.empty()) {
    std::cout << speed_line(results) << "\n";
    char line[200];
    std::snprintf(
        line, sizeof line,
        "Throughput: %zu images in %.2fs, %.1f images/s (decode, forward, save overlapped; after %.2fs "
        "of set-up)",
        results.size(), seconds, double(results.size()) / seconds, setup_s);
    std::cout << line << "\n";
  }
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
  cmd->add_option("--precision", o->precision, kPrecisionHelp)->capture_default_str();
  cmd->add_option("--devices", o->devices,
                  "GPUs that share a folder's batches: comma-separated ordinals or 'all' (cuda); with cpu or "
                  "reference each entry adds a forward worker")
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
