// The conv2d_dgrad / conv2d_wgrad specs, and Conv2dBackwardOp: variant choice, the weight rearrangement of
// v2's input gradient, the weight gradient's split-K (v2-v5), launch shapes and parameters.
#include "kernels/nn/conv2d_backward_op.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

#include "kernels/common/half_type.hpp"
#include "kernels/nn/conv2d_backward_params.cuh"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/nn_kernels.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

constexpr const char* kSource = "nn/conv2d_backward.cu";
constexpr const char* kSiluBackwardKernel = "conv2d_silu_bias_backward";
constexpr const char* kWgradReduceKernel = "conv2d_wgrad_reduce";
constexpr const char* kBiasGradKernel = "conv2d_bias_grad";
constexpr int kThreads = 256;
// The weight gradient's splits hold whole multiples of this many items: 32, a multiple of both tiles'
// reduction chunks (FmaTile 16, MmaTile 32), so no chunk straddles two splits.
constexpr int kSplitGranule = 32;
constexpr int kMaxGridYZ = 65535;
constexpr const char* kVariantNames[] = {"v1_direct",    "v2_tiled",      "v3_fp16",      "v4_bf16",
                                         "v5_depthwise", "v6_fp16_patch", "v7_bf16_patch"};  // enum order
constexpr int kPatchBlock = 16;  // dz channels per shared-memory step of v6 / v7 (nn::kPatchBlock)
constexpr int kPatchCols = 32;   // dx columns of their tiles (nn::kDgradPatchCols)
constexpr int kDepthwiseKernelSizes[] = {3, 5, 7};  // conv2d_wgrad_depthwise<K>'s instances
constexpr int kNarrowKernel = 3, kNarrowTiles[] = {4, 9, 18};  // conv2d_wgrad_narrow<DT, 3, NT>'s instances

// The 16-bit element type of v3, v4, v6, v7.
std::optional<HalfType> half_type(ConvBackwardVariant v) {
  if (v == ConvBackwardVariant::Fp16 || v == ConvBackwardVariant::Fp16Patch) return HalfType::f16;
  if (v == ConvBackwardVariant::Bf16 || v == ConvBackwardVariant::Bf16Patch) return HalfType::bf16;
  return std::nullopt;
}

bool is_patch(ConvBackwardVariant v) {
  return v == ConvBackwardVariant::Fp16Patch || v == ConvBackwardVariant::Bf16Patch;
}

int round_up(int v, int multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

// dx rows of a v6 / v7 tile (nn::DgradPatchTile<TM>::kRows: 16-channel warps, two rows each) and its dynamic
// shared memory (kSharedBytes: two dz patches of (rows / 2 + 1) x 17 positions of 24 halves, two weight tiles
// of TM rows of 9 x 16 + 8 halves).
int patch_tile_rows(int channel_tile) {
  return 2 * 8 / (channel_tile / 16);
}
// v6 / v7's channel tile: at most 32 input channels, 8 dx rows a tile. At 64 (4 rows) each 16-channel block's
// weights, staged into every CTA, served half the dx pixels: 147 KB of weights a CTA at C_out 128 against a
// 13 KB dz patch; at 32 a CTA stages half the weights for the same pixels and a 22 KB patch.
int patch_dgrad_channel_tile(int c_in) {
  return std::min(32, conv_tiled_channel_tile(c_in));
}
size_t patch_shared_bytes(int channel_tile) {
  const size_t positions = size_t(patch_tile_rows(channel_tile) / 2 + 1) * (kPatchCols / 2 + 1);
  return 2 * (positions * (kPatchBlock + 8) + size_t(channel_tile) * (9 * kPatchBlock + 8)) * 2;
}

// [c_out, c_in, taps] -> [c_in, taps, c_out_pad] rounded to `type`, channels past c_out zero: v6 / v7 stage
// a 16-channel block of dz's channels of every tap with two 16-byte copies.
std::vector<uint16_t> patch_input_grad_weights(const std::vector<float>& w, const Conv2dShape& s,
                                               int c_out_pad, HalfType type) {
  const size_t taps = size_t(s.kernel) * s.kernel;
  std::vector<float> out(size_t(s.c_in) * taps * c_out_pad, 0.0f);
  for (size_t co = 0; co < size_t(s.c_out); ++co)
    for (size_t ci = 0; ci < size_t(s.c_in); ++ci)
      for (size_t t = 0; t < taps; ++t)
        out[(ci * taps + t) * c_out_pad + co] = w[(co * s.c_in + ci) * taps + t];
  return to_half_bits(out, type);
}

// The bias sums' CTAs (conv2d_silu_bias_backward, conv2d_bias_grad): one per (channel, group of `images`
// images), each group at least kGroupItems items where the planes are small (one image a CTA left a 20 x 20
// plane 400 items, under two a thread: waves of short CTAs), the groups about equal.
struct BiasSumGroups {
  int images, groups;
};
BiasSumGroups bias_sum_groups(int batch, int plane) {
  constexpr int kGroupItems = 4096;  // 16 a thread
  const int images = std::clamp(kGroupItems / plane, 1, batch), groups = (batch + images - 1) / images;
  return {(batch + groups - 1) / groups, groups};
}

// v1 and v5 run the input gradient with conv2d_dgrad_direct, on the weights as given.
bool direct_input_grad(ConvBackwardVariant v) {
  return v == ConvBackwardVariant::Direct || v == ConvBackwardVariant::Depthwise;
}

// A backward runner's spec: conv2d's parameters less RESIDUAL (its gradient is dy itself), the variants
// "auto", v1_direct ... v5_depthwise, and a compile of the SiLU backward and the reduce that adds its
// per-group bias sums beside the variant's `kernels`. `self` is the spec's own accessor (the compile checks
// the variant against it).
KernelSpec backward_spec(const char* name, const char* description, const char* tiled_description,
                         const KernelSpec& (*self)(),
                         std::vector<std::string> (*kernels)(ConvBackwardVariant, const Conv2dShape&),
                         bool with_patch) {
  std::vector<ParamSpec> params = conv2d_spec().params;
  std::erase_if(params, [](const ParamSpec& p) { return p.name == "RESIDUAL"; });
  const auto variant = [](ConvBackwardVariant v, const char* variant_name, const char* text) {
    return KernelVariant{variant_name, text, [v](const Params& p) {
                           return conv_backward_variant_problem(v, conv2d_shape(p));
                         }};
  };
  const std::string kernel = name;
  std::vector<KernelVariant> variants = {
      {"auto",
       "v5_depthwise where it runs, else v2_tiled where it runs (groups = 1, K 1/3/5), else v1_direct"},
      variant(ConvBackwardVariant::Direct, "v1_direct", "any K / stride / groups (depthwise included)"),
      variant(ConvBackwardVariant::Tiled, "v2_tiled", tiled_description),
      variant(ConvBackwardVariant::Fp16, "v3_fp16",
              "v2 on fp16 tensor cores (mma.sync m16n8k16, float accumulate), float32 results"),
      variant(ConvBackwardVariant::Bf16, "v4_bf16", "v3 with bf16 operands (7 mantissa bits)"),
      variant(ConvBackwardVariant::Depthwise, "v5_depthwise",
              "groups = C_in = C_out, K 3/5/7: the weight gradient one channel x item split per CTA, all K*K "
              "taps in registers; the input gradient v1's")};
  if (with_patch) {
    variants.push_back(
        variant(ConvBackwardVariant::Fp16Patch, "v6_fp16_patch",
                "K 3, stride 2, groups = 1, C_OUT a multiple of 8: fp16 tensor cores with dz "
                "staged once per 16-channel block as a shared patch, every tap an ldmatrix of it"));
    variants.push_back(variant(ConvBackwardVariant::Bf16Patch, "v7_bf16_patch", "v6 with bf16 operands"));
  }
  return KernelSpec{
      .name = name,
      .family = "nn",
      .description = description,
      .source = kSource,
      .variants = variants,
      .params = params,
      .validate = [kernel](const Params& p) { check_conv2d_params(kernel, p); },
      .compile =
          [self, kernels](const std::string& variant_name, const Params& p) {
            check_variant_runs(self(), variant_name, p);
            const Conv2dShape s = conv2d_shape(p);
            std::vector<std::string> names = kernels(
                parse_conv_backward_variant(variant_name).value_or(choose_conv_backward_variant(s)), s);
            names.insert(names.begin(), {kSiluBackwardKernel, kWgradReduceKernel});
            return CompileRequest{kSource, {}, names};
          }};
}

// [c_out, c_in, k, k] -> [c_out*k*k, c_in]: v2's input gradient stages reduction rows (co, ky, kx) with
// coalesced loads over c_in.
std::vector<float> rearrange_for_input_grad(const std::vector<float>& w, const Conv2dShape& s) {
  const size_t taps = size_t(s.kernel) * s.kernel, c_in = size_t(s.c_in);
  std::vector<float> out(w.size());
  for (size_t co = 0; co < size_t(s.c_out); ++co)
    for (size_t ci = 0; ci < c_in; ++ci)
      for (size_t t = 0; t < taps; ++t) out[(co * taps + t) * c_in + ci] = w[(co * c_in + ci) * taps + t];
  return out;
}

// "conv2d_dgrad_tiled<3, 64>" / "conv2d_dgrad_mma<0, 3, 64>" from the gradient's name ("dgrad", "wgrad").
std::string gemm_instance_name(const char* gradient, ConvBackwardVariant v, int kernel, int channel_tile) {
  const std::string shape = std::to_string(kernel) + ", " + std::to_string(channel_tile) + ">";
  if (std::optional<HalfType> type = half_type(v))
    return std::string("conv2d_") + gradient + "_mma<" + half_type_template_arg(*type) + ", " + shape;
  return std::string("conv2d_") + gradient + "_tiled<" + shape;
}

// conv2d_wgrad_narrow's NT (n8 tiles of im2col rows) for a 16-bit weight gradient it runs: 3x3, groups 1,
// C_OUT <= 16 (conv2d_wgrad_mma's TM 16 tile) and C_IN * 9 <= 8 NT rows (the stem's 27: 4 tiles; 72; 144).
std::optional<int> narrow_wgrad_tiles(const Conv2dShape& s) {
  if (s.kernel != kNarrowKernel || s.groups != 1 || s.c_out > 16) return std::nullopt;
  for (int tiles : kNarrowTiles)
    if (s.c_in * s.kernel * s.kernel <= 8 * tiles) return tiles;
  return std::nullopt;
}

std::string narrow_wgrad_instance_name(HalfType type, int tiles) {
  return "conv2d_wgrad_narrow<" + half_type_template_arg(type) + ", " + std::to_string(kNarrowKernel) + ", " +
         std::to_string(tiles) + ">";
}

unsigned blocks_of(long long elements) {
  return unsigned((elements + kThreads - 1) / kThreads);
}

}  // namespace

const KernelSpec& conv2d_dgrad_spec() {
  static const KernelSpec spec = [] {
    KernelSpec dgrad = backward_spec(
        "conv2d_dgrad",
        "Conv2d input gradient dx from dy (through SiLU's derivative) and the weights, fp32 NCHW",
        "groups = 1: implicit GEMM over (class tap, c_out), one stride-phase class per CTA, 16-row chunks "
        "double buffered in shared memory, 4x4 per thread",
        conv2d_dgrad_spec,
        [](ConvBackwardVariant v, const Conv2dShape& s) {
          return std::vector<std::string>{conv_dgrad_kernel_name(v, s)};
        },
        true);
    dgrad.params.push_back(
        {"GATE", ParamSpec::Kind::Bool, "false",
         "dx through the input's own SiLU backward in the epilogue (dx = silu'(z_in) * sum, "
         "z_in a seeded pre-activation), as the training tape runs it"});
    return dgrad;
  }();
  return spec;
}

const KernelSpec& conv2d_wgrad_spec() {
  static const KernelSpec spec = backward_spec(
      "conv2d_wgrad",
      "Conv2d weight and bias gradients dW, db from x and dy (through SiLU's derivative), fp32",
      "groups = 1: implicit GEMM over (b, pixel), split-K with an ordered reduction, 16-item chunks double "
      "buffered in shared memory, 4x4 per thread",
      conv2d_wgrad_spec,
      [](ConvBackwardVariant v, const Conv2dShape& s) {
        // v1 leaves the bias gradient to conv2d_bias_grad; the others sum it in their own launch.
        if (v == ConvBackwardVariant::Direct)
          return std::vector<std::string>{conv_wgrad_kernel_name(v, s), kBiasGradKernel};
        return std::vector<std::string>{conv_wgrad_kernel_name(v, s)};
      },
      false);
  return spec;
}

std::optional<ConvBackwardVariant> parse_conv_backward_variant(const std::string& name) {
  for (int v = 0; v < int(std::size(kVariantNames)); ++v)
    if (name == kVariantNames[v]) return ConvBackwardVariant(v);
  return std::nullopt;
}

std::string conv_backward_variant_problem(ConvBackwardVariant v, const Conv2dShape& s) {
  if (v == ConvBackwardVariant::Direct) return {};
  const std::string name = kVariantNames[int(v)];
  if (v == ConvBackwardVariant::Depthwise) {
    if (!s.depthwise())
      return name + " needs groups = C_IN = C_OUT (got " + std::to_string(s.c_in) + " -> " +
             std::to_string(s.c_out) + " in " + std::to_string(s.groups) + " groups)";
    if (std::ranges::find(kDepthwiseKernelSizes, s.kernel) == std::end(kDepthwiseKernelSizes))
      return name + " is compiled for kernel sizes 3, 5, 7 (got " + std::to_string(s.kernel) + ")";
    return {};
  }
  if (s.groups != 1) return name + " needs groups = 1 (got " + std::to_string(s.groups) + ")";
  if (is_patch(v) && (s.kernel != 3 || s.stride != 2 || s.c_out % 8 != 0))
    return name + " needs K 3, stride 2 and C_OUT a multiple of 8 (got K " + std::to_string(s.kernel) +
           ", stride " + std::to_string(s.stride) + ", C_OUT " + std::to_string(s.c_out) + ")";
  if (!is_specialised_kernel_size(s.kernel))
    return name + " is compiled for kernel sizes 1, 3, 5 (got " + std::to_string(s.kernel) + ")";
  return {};
}

ConvBackwardVariant choose_conv_backward_variant(const Conv2dShape& s, Precision precision) {
  if (conv_backward_variant_problem(ConvBackwardVariant::Depthwise, s).empty())
    return ConvBackwardVariant::Depthwise;
  std::optional<ConvBackwardVariant> half;
  if (precision == Precision::Fp16) half = ConvBackwardVariant::Fp16;
  if (precision == Precision::Bf16) half = ConvBackwardVariant::Bf16;
  if (half && conv_backward_variant_problem(*half, s).empty()) return *half;
  return conv_backward_variant_problem(ConvBackwardVariant::Tiled, s).empty() ? ConvBackwardVariant::Tiled
                                                                             : ConvBackwardVariant::Direct;
}

ConvBackwardVariant choose_conv_input_grad_variant(const Conv2dShape& s, Precision precision) {
  std::optional<ConvBackwardVariant> patch;
  if (precision == Precision::Fp16) patch = ConvBackwardVariant::Fp16Patch;
  if (precision == Precision::Bf16) patch = ConvBackwardVariant::Bf16Patch;
  if (patch && conv_backward_variant_problem(*patch, s).empty()) return *patch;
  return choose_conv_backward_variant(s, precision);
}

// v2 tiles the input gradient's channels by c_in and the weight gradient's by c_out (the GEMMs' M).
std::string conv_dgrad_kernel_name(ConvBackwardVariant v, const Conv2dShape& s) {
  if (direct_input_grad(v)) return "conv2d_dgrad_direct";
  if (is_patch(v))
    return "conv2d_dgrad_patch<" + half_type_template_arg(*half_type(v)) + ", " +
           std::to_string(patch_dgrad_channel_tile(s.c_in)) + ">";
  return gemm_instance_name("dgrad", v, s.kernel, conv_tiled_channel_tile(s.c_in));
}

std::string conv_wgrad_kernel_name(ConvBackwardVariant v, const Conv2dShape& s) {
  if (v == ConvBackwardVariant::Direct) return "conv2d_wgrad_direct";
  if (v == ConvBackwardVariant::Depthwise) return "conv2d_wgrad_depthwise<" + std::to_string(s.kernel) + ">";
  if (const std::optional<HalfType> type = half_type(v))
    if (const std::optional<int> tiles = narrow_wgrad_tiles(s))
      return narrow_wgrad_instance_name(*type, *tiles);
  return gemm_instance_name("wgrad", v, s.kernel, conv_tiled_channel_tile(s.c_out));
}

CompileRequest conv2d_backward_module_request() {
  CompileRequest request{kSource,
                         {},
                         {kSiluBackwardKernel, conv_dgrad_kernel_name(ConvBackwardVariant::Direct, {}),
                          conv_wgrad_kernel_name(ConvBackwardVariant::Direct, {}), kWgradReduceKernel,
                          kBiasGradKernel}};
  for (int k : kSpecialisedKernelSizes)
    for (int tile : kTiledChannelTiles)
      for (const char* gradient : {"dgrad", "wgrad"})
        request.name_expressions.push_back(gemm_instance_name(gradient, ConvBackwardVariant::Tiled, k, tile));
  for (int k : kDepthwiseKernelSizes)
    request.name_expressions.push_back(conv_wgrad_kernel_name(ConvBackwardVariant::Depthwise, {.kernel = k}));
  return request;
}

CompileRequest conv2d_backward_half_module_request() {
  CompileRequest request{kSource, {}, {}};
  for (ConvBackwardVariant v : {ConvBackwardVariant::Fp16, ConvBackwardVariant::Bf16}) {
    for (int k : kSpecialisedKernelSizes)
      for (int tile : kTiledChannelTiles)
        for (const char* gradient : {"dgrad", "wgrad"})
          request.name_expressions.push_back(gemm_instance_name(gradient, v, k, tile));
    for (int tiles : kNarrowTiles)
      request.name_expressions.push_back(narrow_wgrad_instance_name(*half_type(v), tiles));
  }
  for (ConvBackwardVariant v : {ConvBackwardVariant::Fp16Patch, ConvBackwardVariant::Bf16Patch})
    for (int tile : {16, 32})  // patch_dgrad_channel_tile's
      request.name_expressions.push_back(
          conv_dgrad_kernel_name(v, {.c_in = tile, .c_out = 16, .kernel = 3, .stride = 2, .groups = 1}));
  return request;
}

Conv2dBackwardOp::Conv2dBackwardOp(Backend& backend, const Conv2dShape& shape, const std::vector<float>& weight,
                                   std::optional<ConvBackwardVariant> input_grad,
                                   std::optional<ConvBackwardVariant> weight_grad)
    : backend_(backend), shape_(shape), input_grad_(input_grad), weight_grad_(weight_grad) {
  const Conv2dShape& s = shape;
  const std::string text = "conv2d backward " + std::to_string(s.c_in) + "->" + std::to_string(s.c_out) +
                           " k" + std::to_string(s.kernel) + " s" + std::to_string(s.stride) + " g" +
                           std::to_string(s.groups);
  if (s.c_in < 1 || s.c_out < 1 || s.kernel < 1 || s.stride < 1 || s.groups < 1 || s.c_in % s.groups != 0 ||
      s.c_out % s.groups != 0)
    throw UsageError(text + ": channels, kernel, stride and groups must be positive and groups must divide "
                            "both channel counts");
  if ((long long)weight.size() != s.weight_count())
    throw UsageError(text + ": got " + std::to_string(weight.size()) + " weights, expected " +
                     std::to_string(s.weight_count()));
  for (const auto& v : {input_grad, weight_grad})
    if (v)
      if (std::string problem = conv_backward_variant_problem(*v, s); !problem.empty())
        throw UsageError(text + ": " + problem);
  if (weight_grad && is_patch(*weight_grad))
    throw UsageError(text + ": " + kVariantNames[int(*weight_grad)] + " computes only the input gradient");
  module_ = backend.compile(conv2d_backward_module_request());
  if ((input_grad && half_type(*input_grad)) || (weight_grad && half_type(*weight_grad)))
    half_module_ = backend.compile(conv2d_backward_half_module_request());
  const auto gemm = [&](ConvBackwardVariant v, const std::string& name) {
    return (half_type(v) ? half_module_ : module_)->kernel(name);
  };
  silu_backward_ = module_->kernel(kSiluBackwardKernel);
  weight_grad_reduce_ = module_->kernel(kWgradReduceKernel);
  if (input_grad) input_grad_kernel_ = gemm(*input_grad, conv_dgrad_kernel_name(*input_grad, s));
  if (weight_grad) {
    weight_grad_kernel_ = gemm(*weight_grad, conv_wgrad_kernel_name(*weight_grad, s));
    if (*weight_grad == ConvBackwardVariant::Direct) bias_grad_ = module_->kernel(kBiasGradKernel);
  }
  if (input_grad) {
    if (direct_input_grad(*input_grad))
      weight_ = backend.upload_vector(weight);
    else if (is_patch(*input_grad))
      weight_ = backend.upload_vector(
          patch_input_grad_weights(weight, s, round_up(s.c_out, kPatchBlock), *half_type(*input_grad)));
    else if (const std::optional<HalfType> type = half_type(*input_grad))  // rounded once, as the products
      weight_ = backend.upload_vector(to_half_bits(rearrange_for_input_grad(weight, s), *type));
    else
      weight_ = backend.upload_vector(rearrange_for_input_grad(weight, s));
  }
  bias_arrivals_ = backend.alloc_array<unsigned>(size_t(s.c_out));
  backend.fill_bytes(bias_arrivals_.get(), 0, bias_arrivals_.bytes());  // each launch's last CTAs leave zeros
}

ConvWeightLayout Conv2dBackwardOp::weight_layout() const {
  if (!input_grad_) return {};
  const long long c_in = shape_.c_in, taps = (long long)shape_.kernel * shape_.kernel;
  if (direct_input_grad(*input_grad_)) return {weight_.get(), (c_in / shape_.groups) * taps, taps, 1};
  if (is_patch(*input_grad_)) {  // [c_in, taps, c_out_pad] (patch_input_grad_weights)
    const long long c_out_pad = round_up(shape_.c_out, kPatchBlock);
    return {weight_.get(), 1, taps * c_out_pad, c_out_pad, half_type(*input_grad_)};
  }
  // [c_out * taps, c_in] (rearrange_for_input_grad), 16-bit for v3 / v4
  return {weight_.get(), taps * c_in, 1, c_in, half_type(*input_grad_)};
}

void Conv2dBackwardOp::silu_backward(int batch, int plane, const float* grad_out,
                                     int64_t grad_out_batch_stride, const float* z, float* grad_z,
                                     float* grad_bias, float* workspace) const {
  if (batch < 1 || plane < 1) return;
  if (bias_grad_workspace_floats(batch) > 0 && !workspace)
    throw UsageError("conv2d silu backward: the bias sums need a workspace of " +
                     std::to_string(bias_grad_workspace_floats(batch)) + " floats");
  const BiasSumGroups g = bias_sum_groups(batch, plane);
  float* bias_partial = g.groups > 1 ? workspace : nullptr;
  backend_.launch(silu_backward_, {{unsigned(shape_.c_out), unsigned(g.groups), 1}, {kThreads, 1, 1}},
                  kernel_params(Conv2dSiluBiasBackwardParams{
                      grad_out, grad_out_batch_stride, z, grad_z, grad_bias, bias_partial,
                      bias_arrivals_.as<unsigned>(), shape_.c_out, plane, batch, g.images}));
}

void Conv2dBackwardOp::input_grad(int batch, int h, int w, const float* grad_z, float* grad_in) const {
  const int64_t plane = int64_t(h) * w;
  input_grad(batch, h, w, grad_z, {grad_in, shape_.c_in * plane, plane}, false);
}

void Conv2dBackwardOp::input_grad(int batch, int h, int w, const float* grad_z, PlaneView grad_in,
                                  bool accumulate, ConstPlaneView gate) const {
  if (!input_grad_) throw UsageError("conv2d backward: this op was built without the input gradient");
  if (grad_in.channel_stride != int64_t(h) * w)
    throw UsageError("conv2d_dgrad: the input gradient's channels must be dense planes (channel stride " +
                     std::to_string(grad_in.channel_stride) + ", plane " + std::to_string(int64_t(h) * w) +
                     ")");
  if (gate.data && accumulate)
    throw UsageError("conv2d_dgrad: a SiLU gate cannot go with an accumulated gradient");
  if (gate.data && gate.channel_stride != int64_t(h) * w)
    throw UsageError("conv2d_dgrad: the gate's channels must be dense planes (channel stride " +
                     std::to_string(gate.channel_stride) + ")");
  const Conv2dShape& s = shape_;
  const Conv2dBackwardSizes n{batch, s.c_in, s.c_out, h, w, s.out_size(h), s.out_size(w), s.kernel, s.stride,
                              s.groups};
  const bool half = half_type(*input_grad_).has_value();
  const Conv2dDgradParams params{grad_z,
                                 half ? nullptr : weight_.as<const float>(),
                                 half ? weight_.as<const uint16_t>() : nullptr,
                                 grad_in.data,
                                 grad_in.batch_stride,
                                 accumulate ? 1 : 0,
                                 gate.data,
                                 gate.batch_stride,
                                 n};
  const long long plane_in = (long long)h * w;
  if (direct_input_grad(*input_grad_)) {
    backend_.launch(input_grad_kernel_,
                    plane_launch("conv2d_dgrad", plane_in, s.c_in, batch), kernel_params(params));
    return;
  }
  if (is_patch(*input_grad_)) {  // tiles of patch_tile_rows x 32 dx pixels, every image
    if (batch > kMaxGridYZ)
      throw UsageError("conv2d_dgrad: batch " + std::to_string(batch) + " exceeds 65535");
    const int tm = patch_dgrad_channel_tile(s.c_in), rows = patch_tile_rows(tm);
    const long long tiles = (long long)((h + rows - 1) / rows) * ((w + kPatchCols - 1) / kPatchCols);
    LaunchConfig cfg{{unsigned(tiles), unsigned((s.c_in + tm - 1) / tm), unsigned(batch)}, {kThreads, 1, 1}};
    cfg.dynamic_shared_bytes = patch_shared_bytes(tm);
    backend_.launch(input_grad_kernel_, cfg, kernel_params(params));
    return;
  }
  // One CTA row per (image, stride-phase class); the largest class is ceil(h / S) x ceil(w / S) pixels.
  const long long classes = (long long)s.stride * s.stride, grid_z = batch * classes;
  if (grid_z > kMaxGridYZ)
    throw UsageError("conv2d_dgrad: batch " + std::to_string(batch) + " x " + std::to_string(classes) +
                     " stride classes exceeds 65535");
  const long long class_plane = (long long)((h + s.stride - 1) / s.stride) * ((w + s.stride - 1) / s.stride);
  const int tm = conv_tiled_channel_tile(s.c_in), tn = 4096 / tm;
  const LaunchConfig cfg{
      {unsigned((class_plane + tn - 1) / tn), unsigned((s.c_in + tm - 1) / tm), unsigned(grid_z)},
      {kThreads, 1, 1}};
  backend_.launch(input_grad_kernel_, cfg, kernel_params(params));
}

// Splits so that tiles x splits fill about three CTAs per SM of an H200 (132 SMs), about as many as the
// GEMMs' registers (48-94 a thread) and shared memory let each SM hold at 256 threads (2-5, `lab source
// conv2d_wgrad --resources`), each split summing at least 512 items (16 granules); the direct variant never
// splits. v5 (36 registers: 6 CTAs an SM) fills six; its tiles are its channels: at batch 32, 640 (C
// 32..256, 160x160..20x20 planes) 25..4 splits, 800-1024 CTAs.
int Conv2dBackwardOp::weight_grad_splits(int batch, int h, int w) const {
  if (!weight_grad_ || weight_grad_ == ConvBackwardVariant::Direct) return 1;
  const long long kTargetCtas = weight_grad_ == ConvBackwardVariant::Depthwise ? 792 : 396,
                  kMinGranulesPerSplit = 16;
  const int tm = conv_tiled_channel_tile(shape_.c_out), tn = 4096 / tm;
  const long long rows = (long long)shape_.c_in * shape_.kernel * shape_.kernel;
  const long long tiles = weight_grad_ == ConvBackwardVariant::Depthwise
                              ? shape_.c_out
                              : (rows + tn - 1) / tn * ((shape_.c_out + tm - 1) / tm);
  const long long granules =
      ((long long)batch * shape_.out_size(h) * shape_.out_size(w) + kSplitGranule - 1) / kSplitGranule;
  const long long splits =
      std::min({(kTargetCtas + tiles - 1) / tiles, granules / kMinGranulesPerSplit, (long long)kMaxGridYZ});
  if (splits <= 1) return 1;
  const long long granules_per_split = (granules + splits - 1) / splits;
  return int((granules + granules_per_split - 1) / granules_per_split);
}

// v1: conv2d_bias_grad's per-group sums; v2-v5: the splits' partials of the weights, then of the bias.
size_t Conv2dBackwardOp::weight_grad_workspace_floats(int batch, int h, int w) const {
  if (weight_grad_ == ConvBackwardVariant::Direct) return bias_grad_workspace_floats(batch);
  const int splits = weight_grad_splits(batch, h, w);
  return splits == 1 ? 0 : size_t(splits) * (size_t(shape_.weight_count()) + size_t(shape_.c_out));
}

size_t Conv2dBackwardOp::bias_grad_workspace_floats(int batch) const {
  return batch == 1 ? 0 : size_t(batch) * size_t(shape_.c_out);
}

void Conv2dBackwardOp::weight_grad(int batch, int h, int w, ConstPlaneView in, const float* grad_z,
                                   float* grad_w, float* grad_bias, float* workspace) const {
  if (!weight_grad_) throw UsageError("conv2d backward: this op was built without the weight gradient");
  if (in.channel_stride != (int64_t)h * w)
    throw UsageError("conv2d_wgrad: the input's channels must be dense planes (channel stride " +
                     std::to_string(in.channel_stride) + ", plane " + std::to_string((int64_t)h * w) + ")");
  if (in.batch_stride > std::numeric_limits<int>::max())
    throw UsageError("conv2d_wgrad: the input's batch stride " + std::to_string(in.batch_stride) +
                     " exceeds 2^31 - 1 floats");
  const Conv2dShape& s = shape_;
  const int h_out = s.out_size(h), w_out = s.out_size(w);
  const Conv2dBackwardSizes n{batch, s.c_in, s.c_out, h, w, h_out, w_out, s.kernel, s.stride, s.groups};
  const long long count = s.weight_count(), items = (long long)batch * h_out * w_out;
  if (weight_grad_workspace_floats(batch, h, w) > 0 && !workspace)
    throw UsageError("conv2d_wgrad: the split reductions need a workspace of " +
                     std::to_string(weight_grad_workspace_floats(batch, h, w)) + " floats");
  if (*weight_grad_ != ConvBackwardVariant::Direct) {
    // The bias gradient (when asked for) in the same launch: the GEMMs' and the narrow kernel's last column
    // of CTAs, the depthwise kernel's CTAs beside their taps.
    const int splits = weight_grad_splits(batch, h, w);
    const long long granules = (items + kSplitGranule - 1) / kSplitGranule;
    const int split_items = int((granules + splits - 1) / splits * kSplitGranule);
    float* partial = splits > 1 ? workspace : nullptr;
    float* bias_partial = partial && grad_bias ? partial + size_t(splits) * size_t(count) : nullptr;
    const int tm = conv_tiled_channel_tile(s.c_out), tn = 4096 / tm;
    const long long rows = (long long)s.c_in * s.kernel * s.kernel;
    LaunchConfig cfg{{unsigned((rows + tn - 1) / tn + (grad_bias ? 1 : 0)), unsigned((s.c_out + tm - 1) / tm),
                      unsigned(splits)},
                     {kThreads, 1, 1}};
    if (*weight_grad_ == ConvBackwardVariant::Depthwise) cfg.grid = {unsigned(s.c_out), unsigned(splits), 1};
    backend_.launch(weight_grad_kernel_, cfg,
                    kernel_params(Conv2dWgradParams{in.data, int(in.batch_stride), grad_z, grad_w, partial,
                                                    split_items, grad_bias, bias_partial, n}));
    if (partial)  // the splits added in split order
      backend_.launch(weight_grad_reduce_,
                      {{blocks_of(count + (grad_bias ? s.c_out : 0)), 1, 1}, {kThreads, 1, 1}},
                      kernel_params(Conv2dWgradReduceParams{partial, grad_w, bias_partial, grad_bias, splits,
                                                            s.c_out, count}));
    return;
  }
  backend_.launch(weight_grad_kernel_, {{unsigned(count), 1, 1}, {kThreads, 1, 1}},
                  kernel_params(Conv2dWgradParams{in.data, int(in.batch_stride), grad_z, grad_w, nullptr, 0,
                                                  nullptr, nullptr, n}));
  if (!grad_bias) return;  // silu_backward() summed it
  const BiasSumGroups g = bias_sum_groups(batch, h_out * w_out);
  float* bias_partial = g.groups > 1 ? workspace : nullptr;
  backend_.launch(
      bias_grad_, {{unsigned(s.c_out), unsigned(g.groups), 1}, {kThreads, 1, 1}},
      kernel_params(Conv2dBiasGradParams{grad_z, grad_bias, bias_partial, bias_arrivals_.as<unsigned>(),
                                         s.c_out, h_out * w_out, batch, g.images}));
}

}  // namespace lab
