// The pipeline run in a child process (request and result files in both directions) and the per-layer
// comparison with the CPU reference.
#include "viewer/pipeline_session.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "viewer/child_process.hpp"
#include "harness/context.hpp"
#include "kernels/compare.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/detect/tensor_dump.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kImageSize = 640;
// The child's files inside its scratch folder: the tensors (tensor_dump names them after this stem) and the
// summary (model, times, detections, or the failure).
constexpr const char* kTensorStem = "tensors";
constexpr const char* kSummaryFile = "summary.json";

std::vector<AttentionMapInfo> attention_maps(const PipelineRun& run) {
  std::vector<AttentionMapInfo> out;
  for (const auto& [name, t] : run.tensors) {
    if (name.rfind("attn.", 0) != 0 || t.shape.size() != 4) continue;
    AttentionMapInfo info{name, static_cast<int>(t.shape[1]), static_cast<int>(t.shape[2])};
    for (int stride : {32, 16, 8, 64}) {
      const int w = run.geometry.width / stride, h = run.geometry.height / stride;
      if (w * h == info.tokens) {
        info.stride = stride, info.grid_w = w, info.grid_h = h;
        break;
      }
    }
    if (info.stride > 0) out.push_back(info);
  }
  return out;
}

std::vector<std::string> child_argv(const PipelineRequest& r, const fs::path& result_dir) {
  std::vector<std::string> argv{"/proc/self/exe", "--pipeline-child", r.image_path,       "--executor",
                                r.executor,       "--result-dir",     result_dir.string()};
  if (!r.kernels_dir.empty()) argv.insert(argv.end(), {"--kernels-dir", r.kernels_dir});
  if (!r.cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", r.cache_dir});
  return argv;
}

void write_summary(const fs::path& dir, const json& summary) {
  fs::create_directories(dir);
  std::ofstream(dir / kSummaryFile) << summary.dump();
}

// Reads the child's summary and tensors into `run` (the image is decoded here again, for display).
void read_result(const fs::path& dir, const json& summary, PipelineRun& run) {
  run.model_path = summary.at("model").get<std::string>();
  run.model_origin = summary.at("model_origin").get<std::string>();
  run.forward_ms = summary.at("forward_ms").get<double>();
  for (const json& t : summary.at("layer_times"))
    run.layer_times.push_back({t.at("name").get<std::string>(), t.at("ms").get<double>()});
  for (const json& d : summary.at("image").at("detections")) {
    const std::vector<float> xyxy = d.at("xyxy").get<std::vector<float>>();
    run.detections.push_back({d.at("class").get<int>(), d.at("name").get<std::string>(),
                              d.at("score").get<float>(), xyxy.at(0), xyxy.at(1), xyxy.at(2), xyxy.at(3)});
  }
  run.image = decode_image(run.image_path);
  run.geometry = letterbox_geometry(run.image.width, run.image.height, kImageSize, true);
  const SafetensorsFile file = SafetensorsFile::load(dir / (std::string(kTensorStem) + ".safetensors"));
  for (const std::string& name : summary.at("tensor_names").get<std::vector<std::string>>()) {
    NamedTensor t{name, file.info(name).shape, file.floats(name)};
    run.tensor_names.push_back(name);
    run.tensors.emplace(name, std::move(t));
  }
  run.attentions = attention_maps(run);
}

// Position of a tensor in the network: layerNN -> NN, attn.model.NN... -> NN - 0.5, head tensors last.
double network_position(const std::string& name) {
  if (name.rfind("layer", 0) == 0) return std::atof(name.c_str() + 5);
  if (name.rfind("attn.model.", 0) == 0) return std::atof(name.c_str() + 11) - 0.5;
  return 1e9;
}

std::string scientific(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", v);
  return text;
}

}  // namespace

const NamedTensor& PipelineRun::tensor(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw UsageError("the pipeline run has no tensor '" + name + "'");
  return it->second;
}

int pipeline_child_main(const PipelineRequest& request, const std::string& result_dir) {
  try {
    ContextOptions context_options;
    context_options.kernels_dir = request.kernels_dir;
    context_options.cache_dir = request.cache_dir;
    context_options.check_bounds = true;  // cpu emulator: a wild access fails the launch naming the kernel
    const ModelLocation location = locate_model(default_model_search(""));
    DetectorOptions options;
    options.imgsz = kImageSize;
    options.conf = 0;  // every row with a positive score: the panel filters by confidence itself
    Detector detector(Yolo26Model::from_checkpoint(load_checkpoint(location.path)), request.executor,
                      context_options.context(), options);
    const Image image = decode_image(request.image_path);
    detector.network().set_layer_timing(true);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<ImageDetections> results = detector.detect({&image}, {request.image_path});
    const double forward_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Network& network = detector.network();
    dump_network_tensors(network, {kTensorStem}, result_dir);
    json times = json::array();
    for (const LayerTime& t : network.layer_times()) times.push_back({{"name", t.name}, {"ms", t.ms}});
    write_summary(result_dir, {{"model", location.path.string()},
                               {"model_origin", location.origin},
                               {"forward_ms", forward_ms},
                               {"layer_times", times},
                               {"image", image_json(results.at(0))},
                               {"tensor_names", network.tensor_names()}});
    return 0;
  } catch (const std::exception& e) {
    write_summary(result_dir, {{"failure", e.what()}});
    return 1;
  }
}

PipelineRun run_pipeline(const PipelineRequest& request) {
  PipelineRun run;
  run.image_path = request.image_path;
  run.executor = request.executor;
  const std::string who = "pipeline on " + request.executor;
  try {
    const TemporaryFolder dir("lab-viewer-pipeline");
    const ChildExit exit =
        run_child_process(child_argv(request, dir.path()), dir.path() / "child.log", request.timeout_s);
    run.failure = child_failure(exit, who, request.timeout_s, fs::exists(dir.path() / kSummaryFile));
    if (!run.failure.empty()) return run;
    const json summary = json::parse(std::ifstream(dir.path() / kSummaryFile));
    if (summary.contains("failure")) {
      run.failure = who + ": " + summary.at("failure").get<std::string>();
      return run;
    }
    read_result(dir.path(), summary, run);
  } catch (const std::exception& e) {
    run.failure = who + ": unreadable result from the child process: " + e.what();
    run.tensors.clear();
  }
  return run;
}

std::string comparison_summary(const std::vector<LayerError>& errors) {
  const LayerError* first = nullptr;
  const LayerError* worst = nullptr;
  size_t above = 0;
  for (const LayerError& e : errors) {
    if (!worst || !(e.rel_l2 <= worst->rel_l2)) worst = &e;
    if (e.rel_l2 <= kLayerErrorBar) continue;
    ++above;
    if (!first || network_position(e.name) < network_position(first->name)) first = &e;
  }
  if (!worst) return "no tensors compared";
  if (!first)
    return "every tensor within rel L2 " + scientific(kLayerErrorBar) + " of the reference (worst " +
           worst->name + ": " + scientific(worst->rel_l2) + ")";
  return "first layer off the reference: " + first->name + " (rel L2 " + scientific(first->rel_l2) + "), " +
         std::to_string(above) + " tensor" + (above == 1 ? "" : "s") + " above " + scientific(kLayerErrorBar);
}

std::vector<LayerError> compare_with_reference(const PipelineRun& run) {
  const Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(run.model_path));
  const std::unique_ptr<Network> reference = make_reference_network(model);
  const NamedTensor& input = run.tensor("input");
  reference->forward(input.values.data(), 1, run.geometry.height, run.geometry.width);
  std::vector<LayerError> out;
  for (const std::string& name : run.tensor_names) {
    if (name.rfind("layer", 0) != 0 && name.rfind("attn.", 0) != 0 && name.rfind("head.", 0) != 0) continue;
    const NamedTensor& ours = run.tensor(name);
    const NamedTensor want = reference->tensor(name);
    const std::vector<double> want64(want.values.begin(), want.values.end());
    const Metrics m =
        compare_arrays(ours.values.data(), want64.data(), std::min(ours.values.size(), want64.size()));
    LayerError e{name, m.rel_l2, m.max_abs, ours.values.size()};
    if (ours.shape != want.shape) e.rel_l2 = e.max_abs = INFINITY;
    out.push_back(e);
  }
  return out;
}

}  // namespace lab::viewer
