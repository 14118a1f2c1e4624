// NhwcLayerOps and NhwcDepthwise: argument checks, the parameter structs and one launch per call of
// nhwc_layers.cu (nn::kThreads threads a block, one thread per pixel's 8-channel group).
#include "kernels/nn/nhwc_layers_op.hpp"

#include <string>

#include "kernels/nn/nhwc_layers_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kThreads = 256;                 // nn::kThreads of nn_common.cuh
constexpr int64_t kMaxThreads = int64_t(1) << 40;  // far past any network, far below the grid's limit

int groups_of(int channels) {
  return (channels + 7) / 8;
}

LaunchConfig grid_for(const char* op, int64_t threads) {
  if (threads > kMaxThreads) throw UsageError(std::string(op) + ": the tensor is too large");
  return {{unsigned((threads + kThreads - 1) / kThreads), 1, 1},
          {kThreads, 1, 1},
          0,
          /*programmatic_dependent=*/true};  // every kernel of nhwc_layers.cu waits for its predecessor
}

// Throws UsageError naming `op` unless every size is >= 1 and one image's plane (h x w) fits an int.
void check_sizes(const char* op, int batch, int64_t h, int64_t w, int channels) {
  if (batch < 1 || h < 1 || w < 1 || channels < 1)
    throw UsageError(std::string(op) + ": bad size batch " + std::to_string(batch) + ", " +
                     std::to_string(h) + "x" + std::to_string(w) + ", " + std::to_string(channels) +
                     " channels");
  if (h * w > 0x3fffffff)
    throw UsageError(std::string(op) + ": a plane of " + std::to_string(h) + "x" + std::to_string(w) +
                     " is too large");
}

NhwcSource source(const NhwcView& v) {
  return {v.data, v.pitch};
}

NhwcTarget target(const NhwcView& v) {
  return {v.data, v.pitch};
}

}  // namespace

CompileRequest nhwc_layers_compile_request(ActivationType type) {
  const std::string dt = "<" + activation_template_arg(type) + ">";
  return {"nn/nhwc_layers.cu",
          {},
          {"nhwc_pack_input" + dt, "nhwc_depthwise3x3" + dt, "nhwc_maxpool" + dt, "nhwc_upsample2x" + dt,
           "nhwc_copy" + dt, "nhwc_to_planes" + dt}};
}

NhwcLayerOps::NhwcLayerOps(Backend& backend, ActivationType type) : backend_(backend), type_(type) {
  const CompileRequest request = nhwc_layers_compile_request(type);
  module_ = backend.compile(request);
  const auto& names = request.name_expressions;
  pack_input_ = module_->kernel(names[0]);
  depthwise3x3_ = module_->kernel(names[1]);
  maxpool_ = module_->kernel(names[2]);
  upsample2x_ = module_->kernel(names[3]);
  copy_ = module_->kernel(names[4]);
  to_planes_ = module_->kernel(names[5]);
}

void NhwcLayerOps::pack_input(int batch, int h, int w, const float* in, NhwcView out) const {
  const char* op = "nhwc pack_input";
  check_sizes(op, batch, h, w, 3);
  if (!in) throw UsageError(std::string(op) + ": the input tensor is not set");
  check_nhwc_view(op, "output", out, 8);
  const NhwcPackInputParams p{in, target(out), batch, h * w};
  backend_.launch(pack_input_, grid_for(op, int64_t(batch) * h * w), kernel_params(p));
}

void NhwcLayerOps::depthwise3x3(int batch, int h, int w, int channels, const float* weight, const float* bias,
                                bool silu, NhwcView in, NhwcView out, NhwcView residual) const {
  const char* op = "nhwc depthwise3x3";
  check_sizes(op, batch, h, w, channels);
  check_nhwc_view(op, "input", in, channels);
  check_nhwc_view(op, "output", out, channels);
  if (residual.data) check_nhwc_view(op, "residual", residual, channels);
  const NhwcDepthwiseParams p{source(in), source(residual), target(out), weight, bias, batch, h,
                              w,          channels,         silu ? 1 : 0};
  backend_.launch(depthwise3x3_, grid_for(op, int64_t(batch) * h * w * groups_of(channels)),
                  kernel_params(p));
}

void NhwcLayerOps::maxpool(int batch, int h, int w, int channels, int kernel, NhwcView in,
                           NhwcView out) const {
  const char* op = "nhwc maxpool";
  check_sizes(op, batch, h, w, channels);
  if (kernel < 1 || kernel % 2 == 0)
    throw UsageError(std::string(op) + ": the kernel size is odd (padding kernel / 2), not " +
                     std::to_string(kernel));
  check_nhwc_view(op, "input", in, channels);
  check_nhwc_view(op, "output", out, channels);
  const NhwcMaxPoolParams p{source(in), target(out), batch, h, w, channels, kernel};
  backend_.launch(maxpool_, grid_for(op, int64_t(batch) * h * w * groups_of(channels)), kernel_params(p));
}

void NhwcLayerOps::upsample2x(int batch, int h_in, int w_in, int channels, NhwcView in, NhwcView out) const {
  const char* op = "nhwc upsample2x";
  check_sizes(op, batch, 2 * int64_t(h_in), 2 * int64_t(w_in), channels);  // the output's plane
  check_nhwc_view(op, "input", in, channels);
  check_nhwc_view(op, "output", out, channels);
  const NhwcUpsampleParams p{source(in), target(out), batch, h_in, w_in, channels};
  backend_.launch(upsample2x_, grid_for(op, int64_t(batch) * 4 * h_in * w_in * groups_of(channels)),
                  kernel_params(p));
}

void NhwcLayerOps::copy(int64_t pixels, int channels, NhwcView in, NhwcView out) const {
  const char* op = "nhwc copy";
  if (pixels < 1 || channels < 1)
    throw UsageError(std::string(op) + ": bad size " + std::to_string(pixels) + " pixels, " +
                     std::to_string(channels) + " channels");
  check_nhwc_view(op, "input", in, channels);
  check_nhwc_view(op, "output", out, channels);
  const NhwcCopyParams p{source(in), target(out), pixels, channels};
  backend_.launch(copy_, grid_for(op, pixels * groups_of(channels)), kernel_params(p));
}

void NhwcLayerOps::to_planes(int batch, int pixels, int channels, NhwcView in, float* out, int anchors,
                             int first) const {
  const char* op = "nhwc to_planes";
  check_sizes(op, batch, 1, pixels, channels);
  check_nhwc_view(op, "input", in, channels);
  if (!out) throw UsageError(std::string(op) + ": the output planes are not set");
  if (first < 0 || int64_t(first) + pixels > anchors)
    throw UsageError(std::string(op) + ": pixels [" + std::to_string(first) + ", " +
                     std::to_string(int64_t(first) + pixels) + ") do not fit " + std::to_string(anchors) +
                     " anchors");
  const NhwcToPlanesParams p{source(in), out, batch, pixels, channels, anchors, first};
  backend_.launch(to_planes_, grid_for(op, int64_t(batch) * groups_of(channels) * pixels), kernel_params(p));
}

NhwcDepthwise::NhwcDepthwise(const NhwcLayerOps& ops, int channels, const std::vector<float>& weight,
                             const std::vector<float>& bias, bool silu)
    : ops_(ops), channels_(channels), silu_(silu) {
  if (channels < 1 || weight.size() != size_t(channels) * 9 || bias.size() != size_t(channels))
    throw UsageError("nhwc depthwise3x3: " + std::to_string(weight.size()) + " weights and " +
                     std::to_string(bias.size()) + " biases given, " + std::to_string(channels) +
                     " channels need " + std::to_string(int64_t(channels) * 9) + " and " +
                     std::to_string(channels));
  const int padded = nhwc_min_pitch(channels);
  std::vector<float> tap_major(size_t(9) * padded, 0.0f), bias_padded(size_t(padded), 0.0f);
  for (int c = 0; c < channels; ++c) {
    for (int t = 0; t < 9; ++t) tap_major[size_t(t) * padded + c] = weight[size_t(c) * 9 + t];
    bias_padded[size_t(c)] = bias[size_t(c)];
  }
  weight_ = ops.backend().upload_vector(tap_major);
  bias_ = ops.backend().upload_vector(bias_padded);
}

void NhwcDepthwise::run(int batch, int h, int w, NhwcView in, NhwcView out, NhwcView residual) const {
  ops_.depthwise3x3(batch, h, w, channels_, weight_.as<const float>(), bias_.as<const float>(), silu_, in,
                    out, residual);
}

}  // namespace lab
