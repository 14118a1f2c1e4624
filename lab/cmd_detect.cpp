// `lab detect`: YOLO26 on images: letterbox, forward (the CPU reference or our kernels), end-to-end top-k,
// boxes back in image pixels; annotated images into runs/detect/predict[N] (or --out), optional YOLO label
// files and a JSON document (a file, or stdout with `--json -`), one summary line per image and the average
// stage times. --encode nvjpeg encodes the annotated JPEGs on the GPU (nvJPEG, loaded at run time).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <set>

#include "lab/commands.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/batching.hpp"
#include "pipeline/detect/detect_stream.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/detect/tensor_dump.hpp"
#include "pipeline/detect/image_inputs.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/detect/output_folder.hpp"
#include "pipeline/detect/stage_profile.hpp"
#include "pipeline/image/draw.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/nvjpeg_encoder.hpp"
#include "pipeline/image/nvjpeg_library.hpp"
#include "lab/network_options.hpp"
#include "lab/option_checks.hpp"
#include "lab/layout_option.hpp"
#include "lab/precision_option.hpp"
#include "harness/progress.hpp"
#include "lab/size_options.hpp"
#include "lab/version.hpp"

namespace lab {
namespace {

namespace fs = std::filesystem;

struct DetectOptions {
  std::vector<std::string> inputs;
  std::string model, backend = "auto", out, name = "predict", json, dump, precision = "fp32", devices = "0",
                                   layout = "auto", encode = "host";
  int imgsz = 640, batch = 1, max_det = 300;
  float conf = 0.25f;
  std::vector<int> classes;
  bool square = false, save_txt = false, exist_ok = false, nosave = false;
};

const char* const kDefaultProject = "runs/detect";

fs::path annotated_path(const fs::path& out_dir, const fs::path& file) {
  const std::string ext = file.extension().string();
  const bool keeps = ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".JPG" || ext == ".PNG";
  return out_dir / (keeps ? file.filename() : fs::path(file.stem().string() + ".jpg"));
}

fs::path label_path(const fs::path& out_dir, const ImageDetections& r) {
  return out_dir / "labels" / (fs::path(r.file).stem().string() + ".txt");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Draws the detections on the image and encodes it (unless --nosave), and makes its label file
// (--save-txt): the files for the stream's writer threads. Called from the host workers; the draw and encode
// times go to `profile`. JPEGs are encoded by `gpu_encoder` when there is one (--encode nvjpeg).
std::vector<FileWrite> save_outputs(const DetectOptions& o, const fs::path& out_dir, Image& image,
                                    const ImageDetections& r, NvjpegEncoder* gpu_encoder, StageProfile& profile) {
  std::vector<FileWrite> files;
  if (o.save_txt) files.push_back({label_path(out_dir, r), yolo_label_text(r)});
  if (o.nosave) return files;
  auto start = std::chrono::steady_clock::now();
  std::vector<BoxAnnotation> boxes;
  for (const Detection& d : r.detections) {
    char score[16];
    std::snprintf(score, sizeof score, "%.2f", d.score);
    boxes.push_back({d.x1, d.y1, d.x2, d.y2, d.class_id, d.name + " " + score});
  }
  draw_annotations(image, boxes);
  profile.add(Stage::Draw, ms_since(start));
  start = std::chrono::steady_clock::now();
  const fs::path path = annotated_path(out_dir, r.file);
  const bool on_gpu = gpu_encoder && writes_jpeg(path);
  const std::vector<uint8_t> encoded = on_gpu ? gpu_encoder->encode(image, path.string()) : encode_image(image, path);
  files.push_back({path, std::string(encoded.begin(), encoded.end())});
  profile.add(on_gpu ? Stage::GpuEncode : Stage::Encode, ms_since(start));
  return files;
}

// The batch shapes the forwards over `files` will run at, from the image headers (batching.hpp), for the
// Detectors to build before the clock starts.
std::vector<BatchShape> planned_shapes(const std::vector<fs::path>& files, const DetectOptions& o) {
  std::vector<std::optional<ImageSize>> sizes;
  for (const fs::path& file : files) sizes.push_back(image_file_size(file));
  return batch_shapes(sizes, o.imgsz, !o.square, o.batch);
}

// The output folder: --out as given, else runs/detect/NAME, numbered unless --exist-ok.
fs::path output_folder(const DetectOptions& o) {
  if (!o.out.empty()) {
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec || !fs::is_directory(o.out))
      throw UsageError("--out " + o.out + ": cannot create the folder (" + (ec ? ec.message() : "not a folder") +
                       ")");
    return o.out;
  }
  return claim_output_folder(kDefaultProject, o.name, o.exist_ok);
}

// --encode nvjpeg needs the cuda backend and annotated images to encode; the library is loaded here, so a
// missing one fails before the model is read or any folder is made.
void check_gpu_encode(const DetectOptions& o, const std::string& executor) {
  if (o.encode == "host") return;
  const std::string flag = "--encode " + o.encode;
  if (executor != "cuda") throw UsageError(flag + ": needs --backend cuda (this run's backend is " + executor + ")");
  if (o.nosave) throw UsageError(flag + ": nothing to encode with --nosave");
  load_nvjpeg(flag);
}

void run_detect(DetectOptions o, CliState& state) {
  o.imgsz = rounded_imgsz(o.imgsz);
  check_batch_pixels(o.batch, o.imgsz);
  const Precision precision = precision_option(o.precision);
  const LayoutChoice layout_choice = parse_layout_choice(o.layout);
  // With `--json -` the JSON document is standard output, so everything for people goes to stderr.
  const bool json_to_stdout = o.json == "-";
  std::ostream& human = json_to_stdout ? std::cerr : std::cout;

  std::vector<fs::path> files;
  bool any_folder = false;
  if (o.inputs.empty()) {
    files = sample_images();
    if (files.empty())
      throw UsageError("no images given, and no sample images found in the shared assets folder");
  } else {
    std::vector<fs::path> arguments(o.inputs.begin(), o.inputs.end());
    files = collect_images(arguments);
    std::error_code ec;
    for (const fs::path& a : arguments) any_folder = any_folder || fs::is_directory(a, ec);
  }

  std::string backend_note;
  const std::string executor = resolve_executor(o.backend, precision, backend_note);
  check_gpu_encode(o, executor);
  const ModelLocation model = locate_model(default_model_search(o.model));
  DetectorOptions options;
  options.imgsz = o.imgsz, options.rect = !o.square, options.conf = o.conf, options.max_det = o.max_det;
  options.precision = precision;
  options.layout = layout_choice;
  options.classes = o.classes;
  const std::vector<int> devices = parse_devices(o.devices, executor);
  const Yolo26Model network_model = Yolo26Model::from_checkpoint(load_checkpoint(model.path));
  for (int id : o.classes)
    if (id >= int(network_model.class_names.size()))
      throw UsageError("--classes " + std::to_string(id) + ": the model has classes 0 to " +
                       std::to_string(network_model.class_names.size() - 1));
  const RuntimeContext context = state.context();
  std::string layout;  // the network's choice, known once the detectors exist
  // On the first device, made once the Detectors exist (a missing device is their one-line error): the save
  // hook's JPEGs (--encode nvjpeg).
  std::unique_ptr<NvjpegEncoder> gpu_encoder;
  auto header = [&] {
    human << "model " << model.path.string() << " (" << model.origin << "), backend " << executor
          << backend_note << ", imgsz " << o.imgsz << (o.square ? " square" : " rect")
          << (precision == Precision::Fp32 ? "" : ", precision " + precision_name(precision))
          << (runs_our_kernels(executor) ? ", layout " + layout : "")
          << (devices.size() > 1 ? ", " + std::to_string(devices.size()) + " forward workers" : "")
          << (gpu_encoder ? ", encode nvjpeg" : "") << "\n";
  };

  fs::path out_dir;  // made once every Detector exists, so a bad option or device creates nothing
  std::set<std::string> labels_written;
  std::mutex labels_mutex;
  Progress progress(any_folder && files.size() > 1);
  size_t failed = 0;
  std::mutex dump_mutex;
  const int cores = int(std::max(2u, std::thread::hardware_concurrency()));
  StageProfile profile;
  DetectStreamOptions stream;
  stream.detector = options;
  stream.batch = o.batch;
  stream.forward_workers = int(devices.size());
  // The forward workers mostly wait for their device; every other core decodes and saves. Writers mostly
  // wait for the disk (each atomic write fsyncs twice), and the disk serves many of them at once.
  stream.host_threads = std::max(1, cores - stream.forward_workers);
  stream.writer_threads = 2 * cores;
  stream.profile = &profile;
  const auto start = std::chrono::steady_clock::now();
  // Our kernels build one plan per batch shape: all of them before the clock starts.
  if (runs_our_kernels(executor)) stream.prepare = planned_shapes(files, o);
  DetectStreamHooks hooks;
  hooks.make_detector = [&](int worker) {
    RuntimeContext device_context = context;
    device_context.options.device = devices[size_t(worker)];
    auto detector = std::make_unique<Detector>(network_model, executor, device_context, options);
    if (worker == 0) layout = detector->activation_layout();
    return detector;
  };
  auto streaming = start;  // when every Detector exists
  hooks.started = [&] {
    if (o.encode == "nvjpeg")
      gpu_encoder = std::make_unique<NvjpegEncoder>(devices.front(), kJpegQuality, "--encode nvjpeg");
    streaming = std::chrono::steady_clock::now();
    header();
    out_dir = output_folder(o);
    std::error_code ec;
    if (o.save_txt) fs::create_directories(out_dir / "labels", ec);
    if (ec)
      throw UsageError((out_dir / "labels").string() + ": cannot create the folder (" + ec.message() + ")");
  };
  if (!o.dump.empty())
    hooks.after_forward = [&](Detector& detector, const std::vector<std::string>& names) {
      std::lock_guard lock(dump_mutex);
      dump_network_tensors(detector.network(), names, o.dump);
    };
  hooks.save = [&](Image& image, const ImageDetections& r) {
    std::vector<FileWrite> files = save_outputs(o, out_dir, image, r, gpu_encoder.get(), profile);
    std::lock_guard lock(labels_mutex);
    labels_written.insert(label_path(out_dir, r).filename().string());
    return files;
  };
  hooks.finished = [&](const ImageDetections& r) {
    progress.finish();
    human << summary_line(r) << "\n" << std::flush;
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
  // A reused folder keeps only this run's label files (none without --save-txt).
  if (!out_dir.empty())
    remove_stale_labels(out_dir / "labels", o.save_txt ? labels_written : std::set<std::string>{});

  if (!results.empty()) {
    human << speed_line(results) << "\n";
    char line[200];
    std::snprintf(
        line, sizeof line,
        "Throughput: %zu images in %.2fs, %.1f images/s (decode, forward, save overlapped; after %.2fs "
        "of set-up: detectors and %zu forward plans built ahead)",
        results.size(), seconds, double(results.size()) / seconds, setup_s, stream.prepare.size());
    human << line << "\n";
    if (state.verbose) human << profile.report(results.size(), stream.host_threads, stream.forward_workers, stream.writer_threads);
  }
  human << "Results saved to " << out_dir.string() << (o.nosave ? " (--nosave: no annotated images)" : "");
  if (o.save_txt) human << ", " << results.size() << " label files in " << (out_dir / "labels").string();
  human << "\n";
  if (!o.json.empty()) {
    const DetectRunInfo run{lab_version(), model.path.string(), executor, precision_name(precision),
                            o.imgsz,       o.conf,              !o.square, o.classes,
                            layout};
    write_json_output(o.json, detections_json(run, results).dump(2) + "\n", human);
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
  add_model_option(cmd, o->model);
  cmd->add_option("--imgsz", o->imgsz, "Network input size (rounded up to a multiple of 32)")
      ->check(imgsz_range())
      ->capture_default_str();
  cmd->add_option("--conf", o->conf, "Keep detections with a score above this")
      ->check(between(0, 1))
      ->capture_default_str();
  cmd->add_flag("--square", o->square, "Letterbox to imgsz x imgsz instead of the minimum rectangle");
  cmd->add_option("--batch", o->batch, "Images per forward (consecutive images of one letterboxed shape)")
      ->check(batch_range())
      ->capture_default_str();
  add_executor_option(cmd, o->backend);
  cmd->add_option("--precision", o->precision, kPrecisionHelp)->capture_default_str();
  cmd->add_option("--layout", o->layout, kLayoutHelp)
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}))
      ->capture_default_str();
  add_devices_option(cmd, o->devices);
  auto* name = cmd->add_option("--name", o->name,
                               "Output folder runs/detect/NAME, numbered NAME2, NAME3, ... when it exists")
                   ->check(not_empty())
                   ->capture_default_str();
  auto* exist_ok = cmd->add_flag("--exist-ok", o->exist_ok, "Reuse runs/detect/NAME instead of numbering");
  cmd->add_option("--out", o->out,
                  "Exact folder for the annotated images (and labels/), reused if it exists (instead of "
                  "runs/detect/NAME)")
      ->check(not_empty())
      ->excludes(name)
      ->excludes(exist_ok);
  cmd->add_option("--json", o->json, "Write the detections of every image to this JSON file ('-': stdout)")
      ->check(not_empty());
  cmd->add_option("--classes", o->classes, "Keep only these class ids, e.g. --classes 0,5")
      ->delimiter(',')
      ->check(at_least(0));
  cmd->add_flag("--nosave", o->nosave, "Do not write annotated images");
  cmd->add_option("--encode", o->encode,
                  "Where the annotated JPEGs are encoded: host (libjpeg-turbo) or nvjpeg (nvJPEG on the cuda "
                  "backend's first GPU, same quality and 4:2:0; needs --backend cuda, not with --nosave; "
                  "LAB_NVJPEG_LIBRARY picks the library)")
      ->check(CLI::IsMember({"host", "nvjpeg"}))
      ->capture_default_str();
  cmd->add_option("--dump", o->dump,
                  "Write every tensor of the network (input, layer00..layer22, head, attention maps, output) "
                  "to DIR/<image stem>.safetensors");
  cmd->add_flag("--save-txt", o->save_txt, "Write YOLO-format labels (class cx cy w h score) to OUT/labels");
  cmd->add_option("--max-det", o->max_det, "Rows of the end-to-end top-k")
      ->check(at_least(1))
      ->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  lab detect                                    # the sample images -> runs/detect/predict\n"
      "  lab detect photos/ --batch 32 --precision fp16 --json -   # a folder at GPU speed; JSON on stdout\n"
      "  lab detect bus.jpg --classes 0 --nosave --name people --exist-ok\n");
  cmd->callback([&state, o] { run_detect(*o, state); });
}

}  // namespace lab
