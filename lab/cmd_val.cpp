// `lab val DATA.yaml`: YOLO26 over a dataset split (pipeline/val/validator.hpp), printed as Ultralytics
// prints its validation (the table of P, R, mAP50, mAP50-95 overall and per class), with COCO's mAP beside it
// and an optional JSON document of the metrics and every image's detections.
#include <algorithm>
#include <iostream>
#include <thread>

#include "harness/progress.hpp"
#include "lab/commands.hpp"
#include "lab/network_options.hpp"
#include "lab/option_checks.hpp"
#include "lab/layout_option.hpp"
#include "lab/precision_option.hpp"
#include "lab/size_options.hpp"
#include "lab/version.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/val/val_output.hpp"

namespace lab {
namespace {

struct ValOptions {
  std::string data, model, backend = "auto", precision = "fp32", json, split = "val", devices = "0",
                                   layout = "auto";
  int imgsz = 640, batch = 1, max_det = 300;
  float conf = 0.001f;
};

void run_val(ValOptions o, const CliState& state) {
  o.imgsz = rounded_imgsz(o.imgsz);
  check_batch_pixels(o.batch, o.imgsz);
  const Precision precision = precision_option(o.precision);
  const LayoutChoice layout_choice = parse_layout_choice(o.layout);
  const bool json_to_stdout = o.json == "-";
  std::ostream& human = json_to_stdout ? std::cerr : std::cout;

  const dataset::DataConfig config = dataset::read_data_yaml(o.data);
  const dataset::Split split = dataset::read_split(config, o.split);
  for (const std::string& warning : split.report.warnings) std::cerr << "lab: warning: " << warning << "\n";
  if (split.samples.empty())
    throw UsageError(printable_path(o.data) + ": no usable image in split '" + o.split + "' (" +
                     split.report.summary() + ")");

  std::string backend_note;
  const std::string executor = resolve_executor(o.backend, precision, backend_note);
  const std::vector<int> devices = parse_devices(o.devices, executor);
  const ModelLocation model = locate_model(default_model_search(o.model));
  const Yolo26Model network_model = Yolo26Model::from_checkpoint(load_checkpoint(model.path));
  if (network_model.class_names.size() != config.names.size())
    std::cerr << "lab: warning: the model has " << network_model.class_names.size()
              << " classes, the dataset " << config.names.size()
              << ": predicted class ids are compared with the labels' as they are\n";
  std::string layout;  // the network's choice, known once the detectors exist
  auto header = [&] {
    human << "model " << model.path.string() << " (" << model.origin << "), backend " << executor
          << backend_note << ", imgsz " << o.imgsz << " rect"
          << (precision == Precision::Fp32 ? "" : ", precision " + precision_name(precision))
          << (runs_our_kernels(executor) ? ", layout " + layout : "")
          << (devices.size() > 1 ? ", " + std::to_string(devices.size()) + " forward workers" : "") << "\n";
  };

  DetectStreamOptions stream;
  stream.detector.imgsz = o.imgsz, stream.detector.rect = true, stream.detector.conf = o.conf;
  stream.detector.max_det = o.max_det, stream.detector.precision = precision;
  stream.detector.layout = layout_choice;
  stream.batch = o.batch;
  stream.forward_workers = int(devices.size());
  // The forward workers mostly wait for their device; every other core decodes (val saves nothing).
  stream.host_threads =
      std::max(1, int(std::max(2u, std::thread::hardware_concurrency())) - stream.forward_workers);
  const RuntimeContext context = state.context();
  Progress progress(split.samples.size() > 1);
  val::ValHooks hooks;
  hooks.make_detector = [&](int worker) {
    RuntimeContext device_context = context;
    device_context.options.device = devices[size_t(worker)];
    auto detector = std::make_unique<Detector>(network_model, executor, device_context, stream.detector);
    if (worker == 0) layout = detector->activation_layout();
    return detector;
  };
  hooks.started = header;
  hooks.warn = [&](const std::string& line) {
    progress.finish();
    std::cerr << "lab: warning: " << line << "\n";
  };
  hooks.progress = [&](size_t i, size_t total, const std::string& name) { progress.update(i, total, name); };
  const val::ValResult result = val::validate(split, stream, hooks);
  progress.finish();

  human << o.split << ": " << result.report.summary() << "\n"
        << val::metrics_table(result, config.names) << val::coco_line(result) << "\n";
  if (!result.images.empty()) human << speed_line(result.images) << "\n";
  if (o.json.empty()) return;
  const val::ValRunInfo run{
      lab_version(), o.data, o.split, model.path.string(), executor, precision_name(precision),
      o.imgsz,       o.conf,  layout};
  write_json_output(o.json, val::val_json(run, result, config.names).dump(2) + "\n", human);
}

}  // namespace

void add_val_command(CLI::App& app, CliState& state) {
  auto* cmd =
      app.add_subcommand("val",
                         "Validate YOLO26 on a YOLO-format dataset: precision, recall, mAP50 and "
                         "mAP50-95 overall and per class (as Ultralytics reports them), COCO's mAP beside");
  auto o = std::make_shared<ValOptions>();
  cmd->add_option("data", o->data, "Dataset YAML (path, train, val, names)")->required()->check(not_empty());
  add_model_option(cmd, o->model);
  cmd->add_option("--split", o->split, "The split to validate")
      ->check(CLI::IsMember({"val", "train"}))
      ->capture_default_str();
  cmd->add_option("--imgsz", o->imgsz, "Network input size (rounded up to a multiple of 32; rect letterbox)")
      ->check(imgsz_range())
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Images per forward (consecutive images of one letterboxed shape)")
      ->check(batch_range())
      ->capture_default_str();
  cmd->add_option("--conf", o->conf, "Keep detections with a score above this")
      ->check(between(0, 1))
      ->capture_default_str();
  cmd->add_option("--max-det", o->max_det, "Rows of the end-to-end top-k")
      ->check(at_least(1))
      ->capture_default_str();
  add_executor_option(cmd, o->backend);
  cmd->add_option("--precision", o->precision, kPrecisionHelp)->capture_default_str();
  cmd->add_option("--layout", o->layout, kLayoutHelp)
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}))
      ->capture_default_str();
  add_devices_option(cmd, o->devices);
  cmd->add_option("--json", o->json,
                  "Write the metrics and every image's detections to this JSON file ('-': stdout)")
      ->check(not_empty());
  cmd->footer(
      "Examples:\n"
      "  lab val shapes/data.yaml --model yolo26n.pt --batch 16\n"
      "  lab val data.yaml --backend cpu --imgsz 320 --json val.json\n");
  cmd->callback([&state, o] { run_val(*o, state); });
}

}  // namespace lab
