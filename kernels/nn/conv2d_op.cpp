// The conv2d spec, and Conv2dOp: variant choice, weight upload (transposed for v2_tiled and v4_tf32, rounded
// to 16 bits and padded for v5_fp16 and v6_bf16, tap-major for v7_fp16_patch and v8_bf16_patch), launch
// shapes and parameters.
#include "kernels/nn/conv2d_op.hpp"

#include <algorithm>
#include <iterator>
#include <optional>

#include "kernels/common/half_type.hpp"
#include "kernels/nn/nn_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridYZ = 65535;
constexpr int kTiledChunk = 16;  // reduction rows per shared-memory step of v2 and v4 (nn::kTiledChunk)
constexpr int kMmaChunk = 32;    // of v5 and v6 (nn::kMmaChunk)
constexpr int kPatchBlock = 16;  // input channels per shared-memory step of v7 and v8 (nn::kPatchBlock)
constexpr int kPatchCols = 16;   // output columns of their tiles (nn::kPatchCols)
constexpr const char* kVariantNames[] = {"v1_direct", "v2_tiled", "v3_depthwise",  "v4_tf32",
                                         "v5_fp16",   "v6_bf16",  "v7_fp16_patch", "v8_bf16_patch"};
// in ConvVariant order

std::string shape_text(const Conv2dShape& s) {
  return std::to_string(s.c_in) + "->" + std::to_string(s.c_out) + " k" + std::to_string(s.kernel) + " s" +
         std::to_string(s.stride) + " g" + std::to_string(s.groups);
}

void check_shape(const Conv2dShape& s, const std::vector<float>& weight, const std::vector<float>& bias) {
  if (s.c_in < 1 || s.c_out < 1 || s.kernel < 1 || s.stride < 1 || s.groups < 1 || s.c_in % s.groups != 0 ||
      s.c_out % s.groups != 0)
    throw UsageError("conv2d " + shape_text(s) +
                     ": channels, kernel, stride and groups must be positive and groups must divide both "
                     "channel counts");
  if ((long long)weight.size() != s.weight_count() || (int)bias.size() != s.c_out)
    throw UsageError("conv2d " + shape_text(s) + ": got " + std::to_string(weight.size()) + " weights and " +
                     std::to_string(bias.size()) + " biases, expected " + std::to_string(s.weight_count()) +
                     " and " + std::to_string(s.c_out));
}

// v2_tiled, v4_tf32, v5_fp16, v6_bf16: same tiles, grid and split-K.
bool is_implicit_gemm(ConvVariant v) {
  return v == ConvVariant::Tiled || v == ConvVariant::Tf32 || v == ConvVariant::Fp16 ||
         v == ConvVariant::Bf16;
}

bool is_patch(ConvVariant v) {
  return v == ConvVariant::Fp16Patch || v == ConvVariant::Bf16Patch;
}

// Output rows of a v7 / v8 tile at a channel tile and stride (nn::PatchTile<S, TM>::kRows: two a warp along
// pixels; warps of 32 channels at stride 1 and TM 32 / 64, else 16).
int patch_tile_rows(int channel_tile, int stride) {
  const int warp_channels = stride == 1 && channel_tile >= 32 ? 32 : 16;
  return 2 * 8 / (channel_tile / warp_channels);
}

// Dynamic shared memory of a v7 / v8 CTA (nn::PatchTile<S, TM>::kSharedBytes): two patches of (rows - 1) S +
// 3 input rows, each row S runs of ceil(((16 - 1) S + 3) / S) positions of 24 halves, and two weight tiles of
// TM rows of 9 x 16 + 8 halves.
size_t patch_shared_bytes(int channel_tile, int stride) {
  const size_t in_rows = size_t(patch_tile_rows(channel_tile, stride) - 1) * stride + 3;
  const size_t col_slots = ((kPatchCols - 1) * stride + 3 + stride - 1) / stride;
  return 2 *
         (in_rows * stride * col_slots * (kPatchBlock + 8) + size_t(channel_tile) * (9 * kPatchBlock + 8)) *
         2;
}

// Reduction rows an implicit-GEMM variant stages per step; split-K splits are whole multiples of it.
int reduction_chunk(ConvVariant v) {
  return conv_variant_half_type(v) ? kMmaChunk : kTiledChunk;
}

int round_up(int v, int multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

// [c_out, red] -> [red, c_out]: v2_tiled and v4_tf32 stage a chunk of reduction rows with coalesced loads
// over c_out.
std::vector<float> transpose_weights(const std::vector<float>& w, int c_out) {
  const size_t red = w.size() / c_out;
  std::vector<float> t(w.size());
  for (size_t co = 0; co < size_t(c_out); ++co)
    for (size_t r = 0; r < red; ++r) t[r * c_out + co] = w[co * red + r];
  return t;
}

// [c_out, red] -> [c_out, red_pad] rounded to `type`, the padding rows zero: v5 / v6 stage whole 32-row
// chunks of each channel's weights with 16-byte copies.
std::vector<uint16_t> pad_half_weights(const std::vector<float>& w, int c_out, int red_pad, HalfType type) {
  const size_t red = w.size() / c_out;
  std::vector<float> padded(size_t(c_out) * red_pad, 0.0f);
  for (size_t co = 0; co < size_t(c_out); ++co)
    std::copy_n(w.begin() + long(co * red), red, padded.begin() + long(co * red_pad));
  return to_half_bits(padded, type);
}

// v7 / v8 tiles (kPatchCols columns x patch_tile_rows rows) across and down an output plane.
std::pair<int, int> patch_tiles(int channel_tile, int stride, int h_out, int w_out) {
  const int rows = patch_tile_rows(channel_tile, stride);
  return {(w_out + kPatchCols - 1) / kPatchCols, (h_out + rows - 1) / rows};
}

// v7 / v8 channel blocks per split: as for v2-v6, enough splits that the tiles x splits fill about two CTAs
// per SM of an H200 (132 SMs), each split summing at least two blocks (288 reduction rows; v5's at least
// 128).
int patch_blocks_per_split(const Conv2dShape& s, int batch, int h_out, int w_out) {
  const int tm = conv_tiled_channel_tile(s.c_out), blocks = (s.c_in + kPatchBlock - 1) / kPatchBlock;
  const auto [tiles_x, tiles_y] = patch_tiles(tm, s.stride, h_out, w_out);
  const long long tiles = (long long)tiles_x * tiles_y * ((s.c_out + tm - 1) / tm) * batch;
  const long long kTargetCtas = 264, kMinBlocksPerSplit = 2;
  const long long splits = std::min((kTargetCtas + tiles - 1) / tiles, blocks / kMinBlocksPerSplit);
  if (splits <= 1) return blocks;
  return int((blocks + splits - 1) / splits);
}

int patch_splits(const Conv2dShape& s, int batch, int h_in, int w_in) {
  const int blocks = (s.c_in + kPatchBlock - 1) / kPatchBlock;
  const int per_split = patch_blocks_per_split(s, batch, s.out_size(h_in), s.out_size(w_in));
  return (blocks + per_split - 1) / per_split;
}

// [c_out, c_in, taps] -> [c_out, taps, c_in_pad] rounded to `type`, channels past c_in zero: v7 / v8 stage a
// 16-channel block of every tap with two 16-byte copies.
std::vector<uint16_t> tap_major_half_weights(const std::vector<float>& w, const Conv2dShape& s, int c_in_pad,
                                             HalfType type) {
  const size_t taps = size_t(s.kernel) * s.kernel;
  std::vector<float> out(size_t(s.c_out) * taps * c_in_pad, 0.0f);
  for (size_t o = 0; o < size_t(s.c_out); ++o)
    for (size_t i = 0; i < size_t(s.c_in); ++i)
      for (size_t t = 0; t < taps; ++t) out[(o * taps + t) * c_in_pad + i] = w[(o * s.c_in + i) * taps + t];
  return to_half_bits(out, type);
}

// conv2d_mma's and conv2d_mma_patch's launch: the same scalar parameters in the same order (nn_params.cuh
// says why scalars), two of them the variant's own: `geometry` (v5 / v6 the stride, v7 / v8 the tiles across)
// and `split` (v5 / v6 the reduction rows, v7 / v8 the channel blocks of one split).
void launch_half_conv(Backend& backend, const Kernel& kernel, const LaunchConfig& cfg, const Conv2dShape& s,
                      const DeviceBuffer& weight, int weight_pad, const Conv2dEpilogue& epi,
                      ConstPlaneView in, ConstPlaneView residual, PlaneView out, PlaneView pre,
                      ConstPlaneView gate, int batch, int h_in, int w_in, int geometry, int split,
                      float* partial) {
  if ((long long)s.c_in * in.channel_stride >= (1ll << 31))  // their input offsets are int32
    throw UsageError("conv2d " + shape_text(s) + ": an input of 2^31 or more elements per image");
  const float *in_p = in.data, *b_p = epi.bias, *res_p = residual.data, *gate_p = gate.data;
  const uint16_t* wh = weight.as<const uint16_t>();
  long long in_bs = in.batch_stride, in_cs = in.channel_stride, res_bs = residual.batch_stride,
            res_cs = residual.channel_stride, out_bs = out.batch_stride, out_cs = out.channel_stride,
            pre_bs = pre.batch_stride, pre_cs = pre.channel_stride, gate_bs = gate.batch_stride,
            gate_cs = gate.channel_stride;
  int c_in = s.c_in, c_out = s.c_out, h_out = s.out_size(h_in), w_out = s.out_size(w_in),
      silu = s.silu ? 1 : 0;
  float *out_p = out.data, *pre_p = pre.data;
  backend.launch(kernel, cfg,
                 kernel_args(in_p, in_bs, in_cs, wh, weight_pad, b_p, res_p, res_bs, res_cs, out_p, out_bs,
                             out_cs, pre_p, pre_bs, pre_cs, gate_p, gate_bs, gate_cs, c_in, c_out, h_in, w_in,
                             h_out, w_out, geometry, silu, batch, split, partial));
}

// The split-K reduction: the epilogue over the sum of `splits` partial outputs (nothing when partial is
// null).
void reduce_splits(Backend& backend, const Kernel& reduce, const float* partial, int splits,
                   const Conv2dEpilogue& epi, int batch, int c_out, long long plane_out, int silu) {
  if (!partial) return;
  backend.launch(
      reduce, plane_launch("conv2d split-K reduce", plane_out, c_out, batch),
      kernel_params(Conv2dSplitkReduceParams{partial, splits, epi, batch, c_out, int(plane_out), silu}));
}

}  // namespace

const KernelSpec& conv2d_spec() {
  using K = ParamSpec::Kind;
  const auto variant = [](ConvVariant v, const char* description) {
    return KernelVariant{conv_variant_name(v), description,
                         [v](const Params& p) { return conv_variant_problem(v, conv2d_shape(p)); }};
  };
  static const KernelSpec spec{
      .name = "conv2d",
      .family = "nn",
      .description =
          "Conv2d + bias (+ SiLU) (+ residual) on [B,C,H,W] channel views, fp32 (v4-v6: tensor cores)",
      .source = "nn/conv2d.cu",
      .variants =
          {{"auto", "the variant Conv2dOp picks: v3 for depthwise, v2 for groups = 1, else v1 (K 1/3/5)"},
           variant(ConvVariant::Direct, "one thread per output element, any K / stride / groups"),
           variant(ConvVariant::Tiled,
                   "groups = 1: implicit GEMM, 16-row chunks staged in shared memory, 4x4 per thread"),
           variant(ConvVariant::Depthwise,
                   "groups = C_IN = C_OUT: 32x8 output tile from a shared input patch"),
           variant(ConvVariant::Tf32,
                   "groups = 1: v2's implicit GEMM on TF32 tensor cores (wmma m16n16k8), rel_l2 ~2e-4"),
           variant(ConvVariant::Fp16,
                   "groups = 1: implicit GEMM on fp16 tensor cores (mma.sync m16n8k16, float accumulate), "
                   "32-row chunks, cp.async weights, im2col prefetched in registers"),
           variant(ConvVariant::Bf16, "groups = 1: v5 with bf16 operands (7 mantissa bits)"),
           variant(ConvVariant::Fp16Patch,
                   "3x3, stride 1 or 2 (2: C_OUT above 16), groups = 1, C_IN a multiple of 8: v5 with the "
                   "input staged once per 16-channel block as a shared patch, each tap's operand an ldmatrix "
                   "of it"),
           variant(ConvVariant::Bf16Patch, "v7 with bf16 operands")},
      .params = {{"B", K::Int, "1", "batch size", 1, 65535},
                 {"C_IN", K::Int, "32", "input channels", 1, 4096},
                 {"C_OUT", K::Int, "64", "output channels", 1, 4096},
                 {"H", K::Int, "20", "input height", 1, 4096},
                 {"W", K::Int, "20", "input width", 1, 4096},
                 {"K", K::Int, "3", "kernel size (padding K/2)", 1, 15},
                 {"STRIDE", K::Int, "1", "stride", 1, 8},
                 {"GROUPS", K::Int, "1", "groups (must divide C_IN and C_OUT)", 1, 4096},
                 {"SILU", K::Bool, "true", "SiLU activation (else identity)"},
                 {"RESIDUAL", K::Bool, "false", "add a residual tensor after the activation"}},
      .validate = [](const Params& p) { check_conv2d_params("conv2d", p); },
      .compile =
          [](const std::string& variant, const Params& p) {
            check_variant_runs(conv2d_spec(), variant, p);
            const Conv2dShape s = conv2d_shape(p);
            const ConvVariant v = parse_conv_variant(variant).value_or(choose_conv_variant(s));
            return CompileRequest{
                conv_variant_half_type(v) ? kConv2dMmaSource : "nn/conv2d.cu", {}, {conv_kernel_name(v, s)}};
          }};
  return spec;
}

void check_conv2d_params(const std::string& kernel, const Params& p) {
  const Conv2dShape s = conv2d_shape(p);
  if (s.c_in % s.groups != 0 || s.c_out % s.groups != 0)
    throw UsageError("parameter GROUPS=" + p.at("GROUPS") + " of " + kernel + " is invalid: must divide C_IN=" +
                     p.at("C_IN") + " and C_OUT=" + p.at("C_OUT"));
  for (const char* k : {"H", "W"})
    if (s.out_size(int(param_int(p, k))) < 1)
      throw UsageError(std::string("parameter ") + k + "=" + p.at(k) + " of " + kernel +
                       " is invalid: the output would be empty at K=" + p.at("K"));
}

Conv2dShape conv2d_shape(const Params& p) {
  return {int(param_int(p, "C_IN")),   int(param_int(p, "C_OUT")),  int(param_int(p, "K")),
          int(param_int(p, "STRIDE")), int(param_int(p, "GROUPS")), param_bool(p, "SILU")};
}

std::optional<ConvVariant> parse_conv_variant(const std::string& name) {
  for (int v = 0; v < int(std::size(kVariantNames)); ++v)
    if (name == kVariantNames[v]) return ConvVariant(v);
  return std::nullopt;
}

std::string conv_variant_name(ConvVariant v) {
  return kVariantNames[int(v)];
}

std::optional<HalfType> conv_variant_half_type(ConvVariant v) {
  if (v == ConvVariant::Fp16 || v == ConvVariant::Fp16Patch) return HalfType::f16;
  if (v == ConvVariant::Bf16 || v == ConvVariant::Bf16Patch) return HalfType::bf16;
  return std::nullopt;
}

ConvVariant choose_conv_variant(const Conv2dShape& s, Precision precision) {
  if (conv_variant_problem(ConvVariant::Depthwise, s).empty()) return ConvVariant::Depthwise;
  constexpr ConvVariant kDense[] = {ConvVariant::Tiled, ConvVariant::Tf32, ConvVariant::Fp16,
                                    ConvVariant::Bf16};  // in Precision order
  const ConvVariant dense = kDense[int(precision)];
  // v7 at stride 1 only: at stride 2 v5 measured faster (H100, 2026-12-05: 0.191 against 0.218 ms at 64 -> 64
  // on 160 x 160, 0.0954 against 0.131 ms at 128 -> 256 on 40 x 40, batch 32). bf16 keeps v6: v8's sums in
  // another order tipped the NCHW network's one-to-one score of zidane.jpg's right person at 640 square from
  // 0.90 to 0.50 plus a duplicate at 0.30 (reference 0.92; emulator and H100 alike), a case where any
  // bf16-sized perturbation decides between the two outcomes (docs/detect.md, "Precision").
  if (dense == ConvVariant::Fp16 && s.stride == 1 && conv_variant_problem(ConvVariant::Fp16Patch, s).empty())
    return ConvVariant::Fp16Patch;
  if (conv_variant_problem(dense, s).empty()) return dense;
  return ConvVariant::Direct;
}

std::string conv_variant_problem(ConvVariant v, const Conv2dShape& s) {
  if (v == ConvVariant::Direct) return {};
  if (!is_specialised_kernel_size(s.kernel))
    return conv_variant_name(v) + " is compiled for kernel sizes 1, 3, 5 (got " + std::to_string(s.kernel) +
           ")";
  if (is_implicit_gemm(v) && s.groups != 1)
    return conv_variant_name(v) + " needs groups = 1 (got " + std::to_string(s.groups) + ")";
  if (v == ConvVariant::Depthwise && !s.depthwise())
    return "v3_depthwise needs groups = c_in = c_out (got " + shape_text(s) + ")";
  if (is_patch(v) &&
      (s.kernel != 3 || s.stride > 2 || s.groups != 1 || s.c_in % 8 != 0 || (s.stride == 2 && s.c_out <= 16)))
    return conv_variant_name(v) +
           " needs K 3, stride 1 or 2 (2: c_out above 16), groups 1 and c_in a multiple of 8 (got " +
           shape_text(s) + ")";
  return {};
}

int conv_tiled_channel_tile(int c_out) {
  return c_out <= 16 ? 16 : c_out <= 32 ? 32 : 64;
}

std::string conv_instance_name(ConvVariant v, int kernel, int channel_tile, int stride) {
  const std::string k = std::to_string(kernel), tile = std::to_string(channel_tile);
  switch (v) {
    case ConvVariant::Tiled:
      return "conv2d_tiled<" + k + ", " + tile + ">";
    case ConvVariant::Tf32:
      return "conv2d_tf32<" + k + ", " + tile + ">";
    case ConvVariant::Fp16:
    case ConvVariant::Bf16:
      return "conv2d_mma<" + half_type_template_arg(*conv_variant_half_type(v)) + ", " + k + ", " + tile +
             ">";
    case ConvVariant::Fp16Patch:
    case ConvVariant::Bf16Patch:
      return "conv2d_mma_patch<" + half_type_template_arg(*conv_variant_half_type(v)) + ", " +
             std::to_string(stride) + ", " + tile + ">";
    case ConvVariant::Depthwise:
      return "conv2d_depthwise<" + k + ">";
    case ConvVariant::Direct:
      break;
  }
  return kConv2dDirectKernel;
}

std::string conv_kernel_name(ConvVariant v, const Conv2dShape& s) {
  return conv_instance_name(v, s.kernel, conv_tiled_channel_tile(s.c_out), s.stride);
}

Conv2dOp::Conv2dOp(NnKernels& kernels, const Conv2dShape& shape, const std::vector<float>& weight,
                   const std::vector<float>& bias, Precision precision, std::optional<ConvVariant> force)
    : kernels_(kernels), shape_(shape), variant_(force.value_or(choose_conv_variant(shape, precision))) {
  check_shape(shape, weight, bias);
  if (std::string problem = conv_variant_problem(variant_, shape); !problem.empty())
    throw UsageError("conv2d " + shape_text(shape) + ": " + problem);
  kernel_ = kernels.kernel(conv_kernel_name(variant_, shape));
  splitk_reduce_ = kernels.kernel(kConv2dSplitkReduceKernel);
  Backend& backend = kernels.backend();
  if (is_patch(variant_)) {
    weight_row_pad_ = round_up(shape.c_in, kPatchBlock);
    weight_ = backend.upload_vector(
        tap_major_half_weights(weight, shape, weight_row_pad_, *conv_variant_half_type(variant_)));
  } else if (std::optional<HalfType> type = conv_variant_half_type(variant_)) {
    weight_row_pad_ = round_up(shape.c_in * shape.kernel * shape.kernel, kMmaChunk);
    weight_ = backend.upload_vector(pad_half_weights(weight, shape.c_out, weight_row_pad_, *type));
  } else {
    weight_ =
        backend.upload_vector(is_implicit_gemm(variant_) ? transpose_weights(weight, shape.c_out) : weight);
  }
  bias_ = backend.upload_vector(bias);
}

ConvWeightLayout Conv2dOp::weight_layout() const {
  const long long c_out = shape_.c_out, taps = (long long)shape_.kernel * shape_.kernel;
  if (is_patch(variant_))  // [c_out, taps, c_in_pad] 16-bit (tap_major_half_weights)
    return {weight_.get(), taps * weight_row_pad_, 1, weight_row_pad_, conv_variant_half_type(variant_)};
  if (std::optional<HalfType> type = conv_variant_half_type(variant_))  // [c_out, red_pad] (pad_half_weights)
    return {weight_.get(), weight_row_pad_, taps, 1, type};
  if (is_implicit_gemm(variant_)) return {weight_.as<float>(), 1, taps * c_out, c_out};  // [red, c_out]
  return {weight_.as<float>(), (long long)(shape_.c_in / shape_.groups) * taps, taps, 1};
}

// Splits so that the tiles x splits fill about two CTAs per SM of an H200 (132 SMs), each split summing at
// least 128 reduction rows (whole chunks).
int Conv2dOp::splitk_splits(int batch, int h_in, int w_in) const {
  if (is_patch(variant_)) return patch_splits(shape_, batch, h_in, w_in);
  if (!is_implicit_gemm(variant_)) return 1;
  const long long chunk = reduction_chunk(variant_);
  const long long kTargetCtas = 264, kMinChunksPerSplit = 128 / chunk;
  const int tm = conv_tiled_channel_tile(shape_.c_out), tn = 4096 / tm;
  const long long plane_out = (long long)shape_.out_size(h_in) * shape_.out_size(w_in);
  const long long tiles = (plane_out + tn - 1) / tn * ((shape_.c_out + tm - 1) / tm) * batch;
  const long long chunks = (shape_.c_in * shape_.kernel * shape_.kernel + chunk - 1) / chunk;
  const long long splits = std::min((kTargetCtas + tiles - 1) / tiles, chunks / kMinChunksPerSplit);
  if (splits <= 1) return 1;
  const long long rows_per_split = (chunks + splits - 1) / splits * chunk;
  return int((chunks * chunk + rows_per_split - 1) / rows_per_split);
}

size_t Conv2dOp::splitk_workspace_floats(int batch, int h_in, int w_in) const {
  const int splits = splitk_splits(batch, h_in, w_in);
  if (splits == 1) return 0;
  return size_t(splits) * batch * shape_.c_out * shape_.out_size(h_in) * shape_.out_size(w_in);
}

void Conv2dOp::run(int batch, int h_in, int w_in, ConstPlaneView in, PlaneView out, ConstPlaneView residual,
                   float* splitk_workspace, PlaneView pre, ConstPlaneView silu_grad_gate) const {
  const Conv2dShape& s = shape_;
  int h_out = s.out_size(h_in), w_out = s.out_size(w_in), c_out = s.c_out, silu = s.silu ? 1 : 0;
  if (silu_grad_gate.data && variant_ == ConvVariant::Tf32)
    throw UsageError("conv2d " + shape_text(s) + ": v4_tf32 applies no SiLU-backward gate");
  if (silu_grad_gate.data && (silu || pre.data))
    throw UsageError("conv2d " + shape_text(s) +
                     ": a SiLU-backward gate on a conv with an activation or a pre-activation output");
  if (batch < 1 || h_in < 1 || w_in < 1 || h_out < 1 || w_out < 1)
    throw UsageError("conv2d " + shape_text(s) + ": bad input size batch " + std::to_string(batch) + " x " +
                     std::to_string(h_in) + "x" + std::to_string(w_in));
  if (!in.data || !out.data) throw UsageError("conv2d " + shape_text(s) + ": null input or output view");
  if (batch > kMaxGridYZ) throw UsageError("conv2d: batch " + std::to_string(batch) + " exceeds 65535");
  const PlaneIn in_view = kernel_view(in);
  const Conv2dEpilogue epi{bias_.as<const float>(), kernel_view(residual), kernel_view(out), kernel_view(pre),
                           kernel_view(silu_grad_gate)};
  const Conv2dSizes sizes{s.c_in, c_out, h_in, w_in, h_out, w_out};
  const float* w = weight_.as<const float>();
  Backend& backend = kernels_.backend();
  LaunchConfig cfg;
  cfg.block = {kThreads, 1, 1};
  const long long plane_out = (long long)h_out * w_out;
  switch (variant_) {
    case ConvVariant::Direct:
      backend.launch(
          kernel_, plane_launch("conv2d", plane_out, c_out, batch),
          kernel_params(Conv2dDirectParams{in_view, w, epi, sizes, s.kernel, s.stride, s.groups, silu}));
      return;
    case ConvVariant::Tiled:
    case ConvVariant::Tf32:
    case ConvVariant::Fp16:
    case ConvVariant::Bf16: {
      const int tm = conv_tiled_channel_tile(c_out), tn = 4096 / tm, chunk = reduction_chunk(variant_);
      int splits = splitk_workspace ? splitk_splits(batch, h_in, w_in) : 1;
      const int chunks = (s.c_in * s.kernel * s.kernel + chunk - 1) / chunk;
      if (batch * splits > kMaxGridYZ) splits = 1;
      int split_rows = (chunks + splits - 1) / splits * chunk;
      float* partial = splits > 1 ? splitk_workspace : nullptr;
      cfg.grid = {unsigned((plane_out + tn - 1) / tn), unsigned((c_out + tm - 1) / tm),
                  unsigned(batch * splits)};
      if (conv_variant_half_type(variant_))
        launch_half_conv(backend, kernel_, cfg, s, weight_, weight_row_pad_, epi, in, residual, out, pre,
                         silu_grad_gate, batch, h_in, w_in, s.stride, split_rows, partial);
      else
        backend.launch(kernel_, cfg,
                       kernel_params(Conv2dGemmParams{in_view, w, epi, sizes, s.stride, silu, batch,
                                                      split_rows, partial}));
      reduce_splits(backend, splitk_reduce_, partial, splits, epi, batch, c_out, plane_out, silu);
      return;
    }
    case ConvVariant::Fp16Patch:
    case ConvVariant::Bf16Patch: {
      const int tm = conv_tiled_channel_tile(c_out);
      const auto [tiles_x, tiles_y] = patch_tiles(tm, s.stride, h_out, w_out);
      int splits = splitk_workspace ? patch_splits(s, batch, h_in, w_in) : 1;
      if (batch * splits > kMaxGridYZ) splits = 1;
      const int blocks_per_split = splits > 1 ? patch_blocks_per_split(s, batch, h_out, w_out)
                                              : (s.c_in + kPatchBlock - 1) / kPatchBlock;
      float* partial = splits > 1 ? splitk_workspace : nullptr;
      cfg.grid = {unsigned(tiles_x * tiles_y), unsigned((c_out + tm - 1) / tm), unsigned(batch * splits)};
      cfg.dynamic_shared_bytes = patch_shared_bytes(tm, s.stride);
      launch_half_conv(backend, kernel_, cfg, s, weight_, weight_row_pad_, epi, in, residual, out, pre,
                       silu_grad_gate, batch, h_in, w_in, tiles_x, blocks_per_split, partial);
      reduce_splits(backend, splitk_reduce_, partial, splits, epi, batch, c_out, plane_out, silu);
      return;
    }
    case ConvVariant::Depthwise: {
      if (c_out > kMaxGridYZ) throw UsageError("conv2d: " + std::to_string(c_out) + " channels exceed 65535");
      const int tiles_x = (w_out + kDepthwiseTileX - 1) / kDepthwiseTileX;
      const int tiles_y = (h_out + kDepthwiseTileY - 1) / kDepthwiseTileY;
      cfg.grid = {unsigned(tiles_x * tiles_y), unsigned(c_out), unsigned(batch)};
      backend.launch(
          kernel_, cfg,
          kernel_params(Conv2dDepthwiseParams{in_view, w, epi, h_in, w_in, h_out, w_out, s.stride, silu}));
      return;
    }
  }
}

}  // namespace lab
