// Conv2dBackwardOp: the backward of one Conv2d layer (conv2d_backward.cu) on dense NCHW float32 tensors: SiLU
// backward (dz from dy and the forward's pre-activation z, with the bias gradient db summed in the same
// pass), the input gradient dx and the weight (and, without SiLU, bias) gradients dW, db. Variants per
// gradient: v1_direct (any kernel size, stride, groups), v2_tiled (groups == 1, kernel sizes 1, 3, 5:
// implicit GEMMs), v3_fp16 / v4_bf16 (v2 on fp16 / bf16 tensor cores, float accumulation, float32 results),
// v5_depthwise (groups == C_in == C_out, kernel sizes 3, 5, 7: a weight-gradient kernel per channel; its
// input gradient is v1's), and for the input gradient alone v6_fp16_patch / v7_bf16_patch (3x3 stride 2,
// groups 1, C_out a multiple of 8: dz staged once per 16-channel block as a shared patch,
// conv2d_dgrad_patch.cu); the op picks v5 for depthwise shapes, else v2 where it runs, else v1 (the 16-bit
// ones when forced, or chosen at a 16-bit precision; v6 / v7 only when forced). The specs of the runners
// conv2d_dgrad and conv2d_wgrad live here too.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/compare.hpp"
#include "kernels/kernel_spec.hpp"
#include "kernels/nn/conv2d_shape.hpp"
#include "kernels/nn/plane_view.hpp"
#include "kernels/nn/precision.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

enum class ConvBackwardVariant { Direct, Tiled, Fp16, Bf16, Depthwise, Fp16Patch, Bf16Patch };

// The runners' specs: variants "auto", v1_direct, v2_tiled, v3_fp16, v4_bf16, v5_depthwise (conv2d_dgrad
// also v6_fp16_patch, v7_bf16_patch); parameters B, C_IN, C_OUT, H, W, K, STRIDE, GROUPS, SILU (conv2d's,
// less RESIDUAL: its gradient is dy itself).
const KernelSpec& conv2d_dgrad_spec();
const KernelSpec& conv2d_wgrad_spec();
// The bar a variant's gradients are checked at against the float64 reference `ref`
// (conv2d_backward_runner.cpp gives the reasons); sums_grow for the weight and bias gradients, whose max_abs
// scales with their largest.
Tolerance conv_backward_gradient_tolerance(ConvBackwardVariant v, const std::vector<double>& ref,
                                           bool sums_grow);
// The variant a spec variant name forces; nullopt for "auto".
std::optional<ConvBackwardVariant> parse_conv_backward_variant(const std::string& name);
// Empty when `v` can run `s`, else the rule it breaks (one line); v6 / v7 are input-gradient variants.
std::string conv_backward_variant_problem(ConvBackwardVariant v, const Conv2dShape& s);
// v5_depthwise where it runs (at every precision: its sums are float32 FMAs, far from the GEMMs' cost); else
// at Fp16 / Bf16 the matching mma variant (v3_fp16 / v4_bf16) where it runs; otherwise (and at Fp32, Tf32)
// v2_tiled where it runs, else v1_direct.
ConvBackwardVariant choose_conv_backward_variant(const Conv2dShape& s, Precision precision = Precision::Fp32);
// The input gradient's: at Fp16 / Bf16 v6_fp16_patch / v7_bf16_patch where they run (the 3x3 stride-2
// convs), else choose_conv_backward_variant's.
ConvBackwardVariant choose_conv_input_grad_variant(const Conv2dShape& s, Precision precision);
// The kernel name expressions of each gradient at a shape: conv2d_dgrad_tiled<3, 64>, conv2d_wgrad_direct, ...
std::string conv_dgrad_kernel_name(ConvBackwardVariant v, const Conv2dShape& s);
std::string conv_wgrad_kernel_name(ConvBackwardVariant v, const Conv2dShape& s);

// The kernels of conv2d_backward.cu in two modules every Conv2dBackwardOp of a backend shares (each compiled
// once, then a cache hit): the float32 ones (v1, v2 at kernel sizes 1, 3, 5 and channel tiles 16, 32, 64, v5
// at kernel sizes 3, 5, 7, the SiLU backward, reduce and bias kernels), and the 16-bit GEMMs (v3, v4),
// compiled only when an op uses them.
CompileRequest conv2d_backward_module_request();
CompileRequest conv2d_backward_half_module_request();

class Conv2dBackwardOp {
 public:
  // weight [c_out, c_in/groups, k, k]. A gradient given no variant is not built and its method throws.
  // Throws UsageError on a bad shape, weight size or a variant that cannot run the shape.
  Conv2dBackwardOp(Backend& backend, const Conv2dShape& shape, const std::vector<float>& weight,
                   std::optional<ConvBackwardVariant> input_grad,
                   std::optional<ConvBackwardVariant> weight_grad);

  // grad_z = grad_out * silu'(z) over the layer's output [batch, c_out, plane] (plane = ho * wo), and in the
  // same pass grad_bias [c_out] = its sum over images and pixels; `workspace` holds
  // bias_grad_workspace_floats(batch) floats (null allowed when that is 0). grad_out's image b starts at
  // grad_out + b * grad_out_batch_stride (c_out * plane when dense), its channels dense; z and grad_z dense.
  void silu_backward(int batch, int plane, const float* grad_out, int64_t grad_out_batch_stride,
                     const float* z, float* grad_z, float* grad_bias, float* workspace) const;
  // grad_in [B, c_in, h, w] from grad_z [B, c_out, ho, wo]: written, or with `accumulate` added to what it
  // holds (a later gradient contribution, in place: bit for bit add_planes' sum). grad_in may have any batch
  // stride (a channel slice of a concatenation's gradient), its channels dense planes (else UsageError).
  // With a gate (the pre-activation z of x = SiLU(z), dense planes, not with `accumulate`) grad_in gets
  // silu'(z) * the gradient: x's conv's dz, its SiLU backward folded into this epilogue.
  void input_grad(int batch, int h, int w, const float* grad_z, PlaneView grad_in, bool accumulate,
                  ConstPlaneView gate = {}) const;
  // The same into a dense grad_in, written.
  void input_grad(int batch, int h, int w, const float* grad_z, float* grad_in) const;
  // grad_w [c_out, c_in/groups, k, k] and grad_bias [c_out] from in [B, c_in, h, w] and grad_z; grad_bias
  // null leaves the bias gradient to silu_backward(), which summed it. v2-v5 sum grad_bias in the weight
  // gradient's own launch, v1 in a conv2d_bias_grad launch after it. `in` may have any batch stride (a
  // channel slice of a concatenation), its channels dense planes (channel stride h * w, else UsageError).
  // `workspace` holds weight_grad_workspace_floats() floats (null allowed when that is 0).
  void weight_grad(int batch, int h, int w, ConstPlaneView in, const float* grad_z, float* grad_w,
                   float* grad_bias, float* workspace) const;
  // Splits of v2-v5's weight-gradient reduction over (b, output pixel) at this size (1: none), and the floats
  // of partial sums weight_grad() needs: v2-v5 the splits' weights then their bias sums (none when 1), v1 the
  // bias gradient's per-group sums (none at batch 1).
  int weight_grad_splits(int batch, int h, int w) const;
  size_t weight_grad_workspace_floats(int batch, int h, int w) const;
  // The floats of the bias gradient's per-group sums (at most one a channel and image, none at batch 1):
  // silu_backward()'s workspace.
  size_t bias_grad_workspace_floats(int batch) const;

  const Conv2dShape& shape() const { return shape_; }
  // The device weights input_grad() reads, in its variant's layout, for an owner that rewrites them between
  // calls (the training step's BatchNorm fold); data null when the op has no input gradient.
  ConvWeightLayout weight_layout() const;

 private:
  Backend& backend_;
  Conv2dShape shape_;
  std::optional<ConvBackwardVariant> input_grad_, weight_grad_;
  std::shared_ptr<Module> module_, half_module_;  // half_module_: only with a v3 / v4 gradient
  Kernel silu_backward_, input_grad_kernel_, weight_grad_kernel_, weight_grad_reduce_, bias_grad_;
  DeviceBuffer weight_;  // v1, v5: as given; v2: [c_out*k*k, c_in]; v3, v4: that in 16 bits; v6, v7:
                         // [c_in, k*k, c_out padded to 16] in 16 bits
  // The bias sums' arrival count per channel (Conv2dBiasGradParams): one op's launches run in stream order.
  DeviceBuffer bias_arrivals_;
};

}  // namespace lab
