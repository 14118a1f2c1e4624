// KernelNetwork: YOLO26 on our run-time-compiled kernels through a Backend (the
// `cuda` and `cpu` executors of pipeline/network.hpp), with what benchmarks
// need beyond the Network interface.
#pragma once
#include <map>
#include <memory>
#include <tuple>

#include "kernels/preprocess/letterbox_resize_op.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/activation_layout.hpp"
#include "pipeline/executor/nhwc_ops.hpp"
#include "pipeline/executor/shape_plan.hpp"
#include "pipeline/network.hpp"

namespace lab {

class KernelNetwork : public Network {
 public:
  // `precision`: the network's precision (precision_policy.hpp gives each conv's); `layout`: the activation
  // layout (activation_layout.hpp: UsageError for nhwc where it cannot run). Nothing is compiled before the
  // first forward, which compiles every module it needs side by side.
  KernelNetwork(const Yolo26Model& model, Backend& backend, Precision precision = Precision::Fp32,
                LayoutChoice layout = LayoutChoice::Nchw);

  ActivationLayout layout() const { return layout_; }
  std::string activation_layout() const override { return layout_name(layout_); }

  std::string executor_name() const override { return backend_.name(); }

  void forward(const float* input, int batch, int height, int width) override;
  double forward_images(const std::vector<ImageInput>& images, int height, int width) override;
  bool letterboxes_on_device() const override { return true; }
  void prepare(int batch, int height, int width) override;
  std::vector<float> detections() override;
  std::vector<std::string> tensor_names() const override;
  NamedTensor tensor(const std::string& name) override;
  void set_layer_timing(bool on) override { layer_timing_ = on; }
  std::vector<LayerTime> layer_times() const override { return times_; }

  // Device time of one replay of the last forward's recorded launches (no
  // transfers), in milliseconds.
  double replay_ms();
  size_t arena_bytes() const { return last().arena.used_bytes(); }

 private:
  const ShapePlan& last() const {
    if (!last_) throw UsageError("no forward pass has run yet");
    return *last_;
  }
  ShapePlan& plan_for(int batch, int height, int width);
  std::unique_ptr<ShapePlan> build_plan(int batch, int height, int width);
  void run(ShapePlan& plan);  // the forward of an uploaded input
  void run_timed(ShapePlan& plan);
  LaunchGraph& graph_of(ShapePlan& plan);
  LetterboxResizeOp& letterbox_op();  // made on first use
  std::vector<float> download(const Activation& a);
  NamedTensor attention_map(const AttentionRun& run);

  Yolo26Model model_;
  Backend& backend_;
  Precision precision_;
  ActivationLayout layout_;
  std::unique_ptr<NetworkOps> ops_;       // made by the first forward (nchw)
  std::unique_ptr<NhwcOps> nhwc_ops_;     // made by the first forward (nhwc)
  std::map<std::tuple<int, int, int>, std::unique_ptr<ShapePlan>> plans_;
  ShapePlan* last_ = nullptr;
  bool layer_timing_ = false;
  std::vector<LayerTime> times_;
  std::unique_ptr<LetterboxResizeOp> letterbox_;  // by prepare() or the first staged image
  DeviceBuffer staged_;                           // the staged images' blocks, grown to the largest batch's
};

}  // namespace lab
