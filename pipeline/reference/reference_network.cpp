// The CPU reference executor: walks the Yolo26Model layer by layer with the reference ops (float64
// accumulation, float32 activations), keeps every layer's output and both attention maps, computes both heads
// (the one-to-many one where the checkpoint has it), then decodes the one-to-one head and runs the end-to-end
// top-k with the float64 host references of the detect kernels.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/detect/detect_decode.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/network.hpp"
#include "pipeline/reference/ref_modules.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab {

namespace {

using reference::RefTensor;

std::string layer_name(int index) {
  char name[16];
  std::snprintf(name, sizeof name, "layer%02d", index);
  return name;
}

class ReferenceNetwork final : public Network {
 public:
  explicit ReferenceNetwork(Yolo26Model model) : model_(std::move(model)) {}

  std::string executor_name() const override { return "reference"; }

  void forward(const float* input, int batch, int height, int width) override {
    const int max_stride = model_.layers.back().stride;
    if (batch < 1 || height <= 0 || width <= 0 || height % max_stride || width % max_stride)
      throw UsageError("input " + std::to_string(batch) + "x3x" + std::to_string(height) + "x" +
                       std::to_string(width) + ": need batch >= 1 and height, width positive multiples of " +
                       std::to_string(max_stride));
    tensors_.clear();
    times_.clear();
    RefTensor x(batch, 3, height, width);
    x.values.assign(input, input + x.values.size());
    store("input", x);

    std::vector<RefTensor> outputs;
    reference::AttentionMaps maps;
    for (const LayerSpec& layer : model_.layers) {
      const auto start = std::chrono::steady_clock::now();
      auto from = [&](int f) -> const RefTensor& {  // -1: the previous layer (the input for layer 0)
        const int i = f < 0 ? layer.index + f : f;
        return i < 0 ? x : outputs[size_t(i)];
      };
      const RefTensor& in = from(layer.from[0]);
      RefTensor y;
      switch (layer.kind) {
        case LayerSpec::Kind::Conv:
          y = reference::conv2d(layer.conv, in);
          break;
        case LayerSpec::Kind::C3k2:
          y = reference::run_c3k2(layer.c3k2, in, maps);
          break;
        case LayerSpec::Kind::Sppf:
          y = reference::run_sppf(layer.sppf, in);
          break;
        case LayerSpec::Kind::C2Psa:
          y = reference::run_c2psa(layer.c2psa, in, maps);
          break;
        case LayerSpec::Kind::Upsample:
          y = reference::upsample2x(in);
          break;
        case LayerSpec::Kind::Concat: {
          std::vector<const RefTensor*> parts;
          for (int f : layer.from) parts.push_back(&from(f));
          y = reference::concat_channels(parts);
          break;
        }
        case LayerSpec::Kind::Detect:
          run_head(layer.detect, layer.from, outputs, batch, height, width, start);
          continue;
      }
      store(layer_name(layer.index), y);
      outputs.push_back(std::move(y));
      times_.push_back({layer_name(layer.index), elapsed_ms(start)});
    }
    for (auto& [name, map] : maps) tensors_[name] = std::move(map);
  }

  std::vector<float> detections() override { return tensor("output").values; }

  std::vector<std::string> tensor_names() const override {
    std::vector<std::string> names;
    for (const auto& [name, t] : tensors_) names.push_back(name);
    return names;
  }

  NamedTensor tensor(const std::string& name) override {
    const auto it = tensors_.find(name);
    if (it == tensors_.end())
      throw UsageError("reference network: no tensor '" + name + "'" +
                       (tensors_.empty() ? " (run a forward first)" : ""));
    return it->second;
  }

  void set_layer_timing(bool) override {}  // the reference always measures
  std::vector<LayerTime> layer_times() const override { return times_; }

 private:
  using Clock = std::chrono::steady_clock;

  static double elapsed_ms(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }

  void store(const std::string& name, const RefTensor& t) {
    tensors_[name] = NamedTensor{name, t.shape(), t.values};
  }

  void run_head(const DetectSpec& spec, const std::vector<int>& from, const std::vector<RefTensor>& outputs,
                int batch, int height, int width, Clock::time_point start) {
    std::vector<const RefTensor*> levels;
    std::vector<int> strides;
    for (size_t i = 0; i < from.size(); ++i) {
      levels.push_back(&outputs[size_t(from[i])]);
      strides.push_back(spec.levels[i].stride);
    }
    reference::HeadOutputs head = reference::run_detect(spec.levels, spec.nc, levels);
    const int anchors = head.anchors;
    tensors_["head.boxes"] = NamedTensor{"head.boxes", {batch, 4, anchors}, head.boxes};
    tensors_["head.scores"] = NamedTensor{"head.scores", {batch, spec.nc, anchors}, head.logits};
    if (!spec.one2many.empty()) {
      reference::HeadOutputs many = reference::run_detect(spec.one2many, spec.nc, levels);
      tensors_["head.one2many.boxes"] = NamedTensor{"head.one2many.boxes", {batch, 4, anchors}, many.boxes};
      tensors_["head.one2many.scores"] =
          NamedTensor{"head.one2many.scores", {batch, spec.nc, anchors}, many.logits};
    }
    times_.push_back({layer_name(23), elapsed_ms(start)});

    const auto decode_start = Clock::now();
    const std::vector<double> centre =
        detect_decode_reference(head.boxes, make_anchor_grid(height, width, strides), batch);
    const std::vector<float> centre_f(centre.begin(), centre.end());
    times_.push_back({"decode", elapsed_ms(decode_start)});

    const auto topk_start = Clock::now();
    const std::vector<double> rows =
        topk_postprocess_reference(centre_f, head.logits, batch, anchors, spec.nc, spec.max_det);
    const int k = std::min(spec.max_det, anchors);
    tensors_["output"] = NamedTensor{"output", {batch, k, 6}, std::vector<float>(rows.begin(), rows.end())};
    times_.push_back({"topk", elapsed_ms(topk_start)});
  }

  const Yolo26Model model_;  // a copy: the network outlives the caller's description
  std::map<std::string, NamedTensor> tensors_;
  std::vector<LayerTime> times_;
};

}  // namespace

std::unique_ptr<Network> make_reference_network(const Yolo26Model& model) {
  return std::make_unique<ReferenceNetwork>(model);
}

}  // namespace lab
