// The kernel executor: YOLO26 on our run-time-compiled kernels through a
// Backend, in the activation layout chosen at construction (float32 NCHW, or
// 16-bit NHWC: nhwc_plan.hpp). The first forward compiles every module it needs in parallel
// (Backend::precompile) and makes the network's ops. One plan per input shape (arena, launches,
// shape-dependent ops); a plan's launches are captured once and replayed as a CUDA graph (on the cpu emulator
// the replay runs them again). With layer timing on, it runs layer by layer instead and times each layer with
// the backend's timer.
#include "pipeline/executor/kernel_network.hpp"

#include <chrono>
#include <numeric>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/nhwc_plan.hpp"
#include "pipeline/executor/nhwc_readback.hpp"
#include "pipeline/image/staged_letterbox.hpp"

namespace lab {

KernelNetwork::KernelNetwork(const Yolo26Model& model, Backend& backend, Precision precision,
                             LayoutChoice layout)
    : model_(model),
      backend_(backend),
      precision_(precision),
      layout_(choose_layout(layout, model, precision, backend)) {}

void KernelNetwork::forward(const float* input, int batch, int height, int width) {
  ShapePlan& plan = plan_for(batch, height, width);
  const Activation& in = plan.tensors.at("input");
  backend_.upload(in.data, input, size_t(batch) * 3 * height * width * sizeof(float));
  run(plan);
}

double KernelNetwork::forward_images(const std::vector<ImageInput>& images, int height, int width) {
  ShapePlan& plan = plan_for(int(images.size()), height, width);
  const auto start = std::chrono::steady_clock::now();
  float* in = plan.tensors.at("input").data;
  const size_t per_image = size_t(3) * size_t(height) * size_t(width);
  size_t staged_bytes = 0;
  for (const ImageInput& image : images)
    if (image.staged) {
      const LetterboxGeometry& g = image.staged->geometry;
      if (g.width != width || g.height != height)
        throw UsageError("forward_images: a staged letterbox of " + std::to_string(g.width) + "x" +
                         std::to_string(g.height) + " in a batch of " + std::to_string(width) + "x" +
                         std::to_string(height));
      staged_bytes += image.staged->bytes;
    }
  if (staged_bytes > staged_.bytes()) staged_ = backend_.alloc(staged_bytes);
  unsigned char* block = staged_.as<unsigned char>();
  for (size_t i = 0; i < images.size(); ++i) {
    if (images[i].nchw) {
      backend_.upload_async(in + i * per_image, images[i].nchw, per_image * sizeof(float));
      continue;
    }
    const StagedLetterbox& staged = *images[i].staged;
    backend_.upload_async(block, &staged, staged.bytes);
    letterbox_op().launch(letterbox_resize_params(staged, block, in + i * per_image));
    block += staged.bytes;
  }
  backend_.synchronize();  // the images' memory may be refilled from here on
  const double upload_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run(plan);
  return upload_ms;
}

void KernelNetwork::prepare(int batch, int height, int width) {
  ShapePlan& plan = plan_for(batch, height, width);
  if (!layer_timing_) graph_of(plan);
  letterbox_op();  // compiled before a forward over staged images needs it
}

LetterboxResizeOp& KernelNetwork::letterbox_op() {
  if (!letterbox_) letterbox_ = std::make_unique<LetterboxResizeOp>(backend_);
  return *letterbox_;
}

void KernelNetwork::run(ShapePlan& plan) {
  times_.clear();
  if (layer_timing_)
    run_timed(plan);
  else
    graph_of(plan).replay();
  backend_.synchronize();
  last_ = &plan;
}

std::vector<float> KernelNetwork::detections() {
  const ShapePlan& plan = last();
  std::vector<float> rows(size_t(plan.batch) * plan.max_det * 6);
  backend_.download(rows.data(), plan.detections, rows.size() * sizeof(float));
  return rows;
}

std::vector<std::string> KernelNetwork::tensor_names() const {
  std::vector<std::string> names;
  if (!last_) return names;
  for (const auto& [name, activation] : last_->tensors) names.push_back(name);
  for (const auto& [name, activation] : last_->nhwc_tensors) names.push_back(name);
  for (const auto& attention : last_->attentions) names.push_back("attn." + attention->name);
  for (const auto& attention : last_->nhwc_attentions) names.push_back("attn." + attention->name);
  names.push_back("output");
  return names;
}

double KernelNetwork::replay_ms() {
  if (!last_) throw UsageError("no forward pass has run yet");
  LaunchGraph& graph = graph_of(*last_);
  return backend_.time_ms([&graph] { graph.replay(); });
}

ShapePlan& KernelNetwork::plan_for(int batch, int height, int width) {
  auto& plan = plans_[{batch, height, width}];
  if (!plan) plan = build_plan(batch, height, width);
  return *plan;
}

// Every module this forward needs, compiled side by side; the ops then load them from the cache.
std::unique_ptr<ShapePlan> KernelNetwork::build_plan(int batch, int height, int width) {
  if (layout_ == ActivationLayout::Nhwc) {
    std::vector<CompileRequest> requests =
        nhwc_plan_compile_requests(model_, nhwc_activation_type(precision_));
    if (!nhwc_ops_)
      for (CompileRequest& r : NhwcOps::compile_requests(model_, precision_))
        requests.push_back(std::move(r));
    backend_.precompile(requests);
    if (!nhwc_ops_) nhwc_ops_ = std::make_unique<NhwcOps>(backend_, model_, precision_);
    return build_nhwc_plan(*nhwc_ops_, model_, batch, height, width);
  }
  std::vector<CompileRequest> requests = plan_compile_requests(model_, batch, height, width);
  if (!ops_)
    for (CompileRequest& r : NetworkOps::compile_requests(model_, precision_))
      requests.push_back(std::move(r));
  backend_.precompile(requests);
  if (!ops_) ops_ = std::make_unique<NetworkOps>(backend_, model_, precision_);
  return build_shape_plan(*ops_, model_, batch, height, width);
}

LaunchGraph& KernelNetwork::graph_of(ShapePlan& plan) {
  if (!plan.graph)
    plan.graph = backend_.capture([&plan] {
      for (const PlanStep& step : plan.steps) step.run();
    });
  return *plan.graph;
}

void KernelNetwork::run_timed(ShapePlan& plan) {
  for (size_t i = 0; i < plan.steps.size();) {
    size_t end = i;
    while (end < plan.steps.size() && plan.steps[end].layer == plan.steps[i].layer) ++end;
    double ms = 0;
    try {
      ms = backend_.time_ms([&] {
        for (size_t s = i; s < end; ++s) plan.steps[s].run();
      });
    } catch (const std::exception& e) {
      // Timed layers end in a synchronisation, so a kernel fault surfaces in the layer that launched it.
      throw RuntimeError(plan.steps[i].layer + ": " + e.what());
    }
    times_.push_back({plan.steps[i].layer, ms});
    i = end;
  }
}

std::vector<float> KernelNetwork::download(const Activation& a) {
  std::vector<float> host(size_t(a.batch) * a.channels * a.plane());
  if (a.contiguous()) {
    backend_.download(host.data(), a.data, host.size() * sizeof(float));
    return host;
  }
  const size_t plane = size_t(a.plane());
  for (int b = 0; b < a.batch; ++b)
    for (int c = 0; c < a.channels; ++c)
      backend_.download(host.data() + (size_t(b) * a.channels + c) * plane,
                        a.data + b * a.batch_stride + c * a.channel_stride, plane * sizeof(float));
  return host;
}

// Softmax probabilities [B, heads, N, N] rebuilt from the forward's Q, K and
// logsumexp (the `probs` kernel of the same Flash Attention 2 variant), one
// head at a time.
NamedTensor KernelNetwork::attention_map(const AttentionRun& run) {
  const PsaDims& d = run.op->dims();
  const size_t n = size_t(d.n), maps = size_t(d.batch_heads());
  std::vector<int> row_ids(n);
  std::iota(row_ids.begin(), row_ids.end(), 0);
  DeviceBuffer rows = backend_.upload_vector(row_ids);
  DeviceBuffer out = backend_.alloc_array<float>(n * n);
  const float* q = run.workspace.packed.as<const float>();
  const float* k = q + d.head_elems();
  AttentionProblem problem{d.batch_heads(), d.n, d.n, d.scale};
  NamedTensor t{"attn." + run.name, {d.batch, d.num_heads, d.n, d.n}, std::vector<float>(maps * n * n)};
  for (size_t head = 0; head < maps; ++head) {
    run.op->fa2().probs(q, k, run.workspace.lse.as<const float>(), rows.as<const int>(), d.n, int(head),
                        problem, out.as<float>());
    backend_.download(t.values.data() + head * n * n, out.get(), n * n * sizeof(float));
  }
  return t;
}

NamedTensor KernelNetwork::tensor(const std::string& name) {
  const ShapePlan& plan = last();
  if (name == "output") return {name, {plan.batch, plan.max_det, 6}, detections()};
  for (const auto& attention : plan.attentions)
    if (name == "attn." + attention->name) return attention_map(*attention);
  for (const auto& attention : plan.nhwc_attentions)
    if (name == "attn." + attention->name) return nhwc_attention_map(backend_, *attention);
  if (auto nhwc = plan.nhwc_tensors.find(name); nhwc != plan.nhwc_tensors.end()) {
    const NhwcActivation& a = nhwc->second;
    return {name, {a.batch, a.channels, a.height, a.width}, download_nhwc(backend_, a)};
  }
  auto it = plan.tensors.find(name);
  if (it == plan.tensors.end())
    throw UsageError("unknown tensor '" + name + "' (see the network's tensor names)");
  const Activation& a = it->second;
  std::vector<int64_t> shape{a.batch, a.channels, a.height, a.width};
  if (name.rfind("head.", 0) == 0) shape = {a.batch, a.channels, a.width};  // [B, C, A]
  return {name, shape, download(a)};
}

std::unique_ptr<Network> make_kernel_network(const Yolo26Model& model, Backend& backend, Precision precision,
                                             LayoutChoice layout) {
  return std::make_unique<KernelNetwork>(model, backend, precision, layout);
}

}  // namespace lab
