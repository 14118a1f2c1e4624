// One YOLO26 run for the Pipeline panel. The forward runs in a child process (this executable in
// --pipeline-child mode): it finds and loads the checkpoint, letterboxes the image, runs the chosen executor
// (the CPU reference, or our kernels on cuda / the cpu emulator, built from the editable kernel tree) and
// writes every named tensor, the per-layer times and the end-to-end detections (mapped back to the source
// image) into a result file. So an edited kernel that faults on the GPU, crashes the emulator or hangs
// costs the run, never the viewer or its CUDA context. A second job compares every layer with the CPU
// reference on the same input, in the viewer's process (the reference runs no kernel code).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pipeline/detect/detection.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/letterbox.hpp"
#include "pipeline/network.hpp"

namespace lab::viewer {

struct AttentionMapInfo {
  std::string name;  // tensor name "attn.<block>"
  int heads = 0, tokens = 0;
  int grid_w = 0, grid_h = 0, stride = 0;  // the token grid over the network input
};

struct LayerError {
  std::string name;
  double rel_l2 = 0, max_abs = 0;
  size_t count = 0;
};

struct PipelineRequest {
  std::string image_path, executor;  // executor: "reference", "cpu", "cuda"
  std::string kernels_dir, cache_dir;
  double timeout_s = 1200;  // yolo26n on the cpu emulator takes up to a few minutes on 2 cores
};

struct PipelineRun {
  std::string image_path, executor, model_path, model_origin;
  Image image;
  LetterboxGeometry geometry;
  std::vector<Detection> detections;  // every row of the end-to-end output with a positive score
  std::vector<LayerTime> layer_times;
  double forward_ms = 0;
  std::vector<std::string> tensor_names;       // in the network's order; "input" included
  std::map<std::string, NamedTensor> tensors;  // by name
  std::vector<AttentionMapInfo> attentions;
  std::string failure;  // load, decode, compile, forward failure or a dead child: the run has no results

  // Throws UsageError for a name the run does not have.
  const NamedTensor& tensor(const std::string& name) const;
};

// Parent side: runs the pipeline in a child process. Never throws: failures land in `failure`.
PipelineRun run_pipeline(const PipelineRequest& request);
// Child side (`lab-viewer --pipeline-child ...`): runs the forward and writes `result_file`. Exit code.
int pipeline_child_main(const PipelineRequest& request, const std::string& result_file);
// Runs the CPU reference on the run's input and compares each layer, head tensor and attention map. Throws
// on failure.
std::vector<LayerError> compare_with_reference(const PipelineRun& run);

// Relative L2 error above which a tensor counts as off the reference (our float32 kernels stay below 1e-4).
constexpr double kLayerErrorBar = 1e-3;
// One line for the comparison: "every tensor within ..." or "first layer off the reference: layer11 (rel L2
// 3.1e-01), N tensors above 1e-03" (network order: a layer's attention map before its output, the head last).
std::string comparison_summary(const std::vector<LayerError>& errors);

}  // namespace lab::viewer
