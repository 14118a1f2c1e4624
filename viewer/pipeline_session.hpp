// One YOLO26 run for the Pipeline panel: find and load the checkpoint, letterbox the image, run a forward on
// the chosen executor (the CPU reference, or our kernels on cuda / the cpu emulator), keep the Network so
// feature maps and attention maps can be read after the run, and map every end-to-end detection back to the
// source image (the panel filters them by confidence without re-running). A second job compares every layer
// with the CPU reference on the same input.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pipeline/detect/detection.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/network.hpp"
#include "nvrtc_runtime/runtime_context.hpp"

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

struct PipelineRun {
  std::string image_path, executor, model_path, model_origin;
  Image image;
  LetterboxGeometry geometry;
  std::vector<float> input;           // [1, 3, H, W], kept for the reference comparison
  std::vector<Detection> detections;  // every row of the end-to-end output with a positive score
  std::vector<LayerTime> layer_times;
  double forward_ms = 0;
  std::vector<std::string> tensor_names;
  std::vector<AttentionMapInfo> attentions;
  std::shared_ptr<Backend> backend;  // declared before `network`: destroyed after it
  std::shared_ptr<Network> network;
  std::shared_ptr<const Yolo26Model> model;
  std::string failure;  // load, decode or forward failure: the run has no results
};

// Never throws: failures land in `failure`.
PipelineRun run_pipeline(const RuntimeContext& context, const std::string& image_path,
                         const std::string& executor);
// Runs the CPU reference on `run.input` and compares each layer and attention map. Throws on failure.
std::vector<LayerError> compare_with_reference(const PipelineRun& run);

}  // namespace lab::viewer
