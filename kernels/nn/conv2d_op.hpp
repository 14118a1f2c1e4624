// Conv2dOp: one Conv2d layer (folded BN bias, optional SiLU, optional residual) on the nn module. Weights are
// uploaded once at construction (in the layout the chosen variant reads); run() only launches.
// Variants (conv2d.cu, conv2d_mma.cu, conv2d_mma_patch.cu): v1_direct (any shape), v2_tiled (groups == 1),
// v3_depthwise (groups == c_in == c_out), v4_tf32 (groups == 1, TF32 tensor cores), v5_fp16 / v6_bf16 (groups
// == 1, fp16 / bf16 tensor cores); all but v1 exist for kernel sizes 1, 3, 5; v7_fp16_patch / v8_bf16_patch
// (3x3, stride 1 or 2, groups 1, c_in a multiple of 8: v5 / v6 with the input staged once per channel block
// as a shared patch). The op picks v3 for depthwise shapes, for dense ones the variant of the precision (v2
// for Precision::Fp32, the default; v4, v5, v6 for Tf32, Fp16, Bf16), and v1 otherwise; the runner can force
// one (v7 is fp16's choice for the stride-1 3x3 convs; v8 runs only when forced: choose_conv_variant says why).
// conv2d_spec() describes them all: the runner is made from it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/nn/conv2d_shape.hpp"
#include "kernels/nn/nn_kernels.hpp"
#include "kernels/nn/plane_view.hpp"
#include "kernels/nn/precision.hpp"

namespace lab {

enum class ConvVariant { Direct, Tiled, Depthwise, Tf32, Fp16, Bf16, Fp16Patch, Bf16Patch };

// The conv2d spec: variant "auto" (the op's fp32 choice), then v1_direct .. v8_bf16_patch in ConvVariant
// order, each with the rule of the shapes it runs; parameters B, C_IN, C_OUT, H, W, K, STRIDE, GROUPS, SILU,
// RESIDUAL; `compile` names the one instance a variant runs at the parameters' shape.
const KernelSpec& conv2d_spec();
// The shape of resolved conv2d parameters.
Conv2dShape conv2d_shape(const Params& p);
// The cross-parameter rules of conv2d's shape parameters (GROUPS divides both channel counts, a non-empty
// output), as a UsageError naming `kernel` (conv2d, conv2d_dgrad, conv2d_wgrad).
void check_conv2d_params(const std::string& kernel, const Params& p);
// The variant a spec variant name forces; nullopt for "auto".
std::optional<ConvVariant> parse_conv_variant(const std::string& name);
// "v1_direct", "v2_tiled", "v3_depthwise", "v4_tf32", "v5_fp16", "v6_bf16", "v7_fp16_patch", "v8_bf16_patch"
std::string conv_variant_name(ConvVariant v);
// The 16-bit operand type of the tensor-core variants v5-v8 (conv2d_mma.cu's module); nullopt for the others.
std::optional<HalfType> conv_variant_half_type(ConvVariant v);
// The variant the op picks for a shape at a precision: v3_depthwise where it runs; at Fp16 v7_fp16_patch for
// the stride-1 convs it runs, else v5; at Fp32 / Tf32 / Bf16 v2 / v4 / v6; else v1_direct.
ConvVariant choose_conv_variant(const Conv2dShape& s, Precision precision = Precision::Fp32);
// Empty when `v` can run `s`, else the rule it breaks (one line).
std::string conv_variant_problem(ConvVariant v, const Conv2dShape& s);
// Output channels per CTA of the implicit-GEMM variants (v2, v4-v8): the smallest of 16, 32, 64 that covers
// c_out (64 above).
int conv_tiled_channel_tile(int c_out);
// The kernel name expression of a variant at a kernel size and channel tile (conv2d_tiled<3, 64>,
// conv2d_mma<0, 3, 64>, conv2d_depthwise<3>, conv2d_direct; v7 / v8 at a stride too: conv2d_mma_patch<0, 2,
// 64>), and at a shape.
std::string conv_instance_name(ConvVariant v, int kernel, int channel_tile, int stride = 1);
std::string conv_kernel_name(ConvVariant v, const Conv2dShape& s);

class Conv2dOp {
 public:
  // weight [c_out, c_in/groups, k, k], bias [c_out]; throws UsageError on a bad shape or weight size. The
  // variant is choose_conv_variant(shape, precision) unless `force` names one.
  Conv2dOp(NnKernels& kernels, const Conv2dShape& shape, const std::vector<float>& weight,
           const std::vector<float>& bias, Precision precision = Precision::Fp32,
           std::optional<ConvVariant> force = std::nullopt);

  // out = act(conv(in) + bias) (+ residual when residual.data), and pre = conv(in) + bias when pre.data (the
  // pre-activation the training forward keeps, from the same epilogue); in [B, c_in, h_in, w_in], out, pre,
  // residual and silu_grad_gate [B, c_out, out_size(h_in), out_size(w_in)]. With silu_grad_gate.data (a conv
  // without activation or pre) out = (conv(in) + bias) * silu'(gate) (+ residual): an input-gradient conv
  // applying, for the SiLU conv whose output it is the whole gradient of, that conv's SiLU backward (gate:
  // its z). With `splitk_workspace` (splitk_workspace_floats() floats) an implicit-GEMM conv whose output
  // tiles cannot fill the GPU splits its reduction over several CTAs.
  void run(int batch, int h_in, int w_in, ConstPlaneView in, PlaneView out, ConstPlaneView residual = {},
           float* splitk_workspace = nullptr, PlaneView pre = {}, ConstPlaneView silu_grad_gate = {}) const;
  // Reduction splits the op uses at this input size (1: none), and the workspace they need (0 when 1).
  int splitk_splits(int batch, int h_in, int w_in) const;
  size_t splitk_workspace_floats(int batch, int h_in, int w_in) const;

  const Conv2dShape& shape() const { return shape_; }
  ConvVariant variant() const { return variant_; }
  // The device weights in the variant's layout, and the bias [c_out]: what run() reads, for an owner that
  // rewrites them between runs (the training step's BatchNorm fold); v5-v8: their 16-bit operands.
  ConvWeightLayout weight_layout() const;
  float* bias_data() const { return bias_.as<float>(); }

 private:
  NnKernels& kernels_;
  Conv2dShape shape_;
  ConvVariant variant_;
  Kernel kernel_, splitk_reduce_;
  DeviceBuffer weight_, bias_;
  int weight_row_pad_ = 0;  // v5 / v6: reduction rows per output channel in weight_, padded to a chunk;
                            // v7 / v8: input channels per tap, padded to a channel block
};

}  // namespace lab
