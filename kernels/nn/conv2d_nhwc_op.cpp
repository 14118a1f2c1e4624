// Conv2dNhwcOp: the tile rule, the weights in the kernel's layout, the tensor maps of each run and the launch
// of conv2d_nhwc.
#include "kernels/nn/conv2d_nhwc_op.hpp"

#include <algorithm>

#include "kernels/nn/conv2d_nhwc_params.cuh"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {
namespace {

constexpr const char* kSource = "nn/conv2d_nhwc.cu";
constexpr int kStages = 4;

TensorElement element_of(ActivationType type) {
  return type == ActivationType::f16    ? TensorElement::F16
         : type == ActivationType::bf16 ? TensorElement::BF16
                                        : TensorElement::F32;
}

// Operand tiles of a stage: 2 (A, B and their lo parts) for f32's 3xTF32 products, else 1.
int operands_of(ActivationType type) {
  return type == ActivationType::f32 ? 2 : 1;
}

// The swizzle of tile rows of BK elements of `type`.
TensorSwizzle swizzle_of(ActivationType type, int bk) {
  const int row_bytes = bk * activation_bytes(type);
  return row_bytes == 128 ? TensorSwizzle::B128 : row_bytes == 64 ? TensorSwizzle::B64 : TensorSwizzle::B32;
}

// A borrowed view of the bytes `pixels` pixels of `channels` channels of `type` span at `v`.
DeviceBuffer span_of(ActivationType type, const NhwcView& v, int64_t pixels, int channels) {
  return DeviceBuffer::borrow(v.data,
                              size_t((pixels - 1) * v.pitch + channels) * size_t(activation_bytes(type)));
}

// [C_out][C_in][K][K] float -> [C_out][K*K][pitch] of `type`, channels past C_in zero. f32 (3xTF32): the
// weights rounded to nearest tf32, and with `low` their remainders (split_tf32).
std::vector<unsigned char> kernel_weights(const Conv2dShape& s, ActivationType type,
                                          const std::vector<float>& weight, bool low = false) {
  const int taps = s.kernel * s.kernel, pitch = nhwc_min_pitch(s.c_in);
  std::vector<float> w(size_t(s.c_out) * taps * pitch, 0.0f);
  for (int co = 0; co < s.c_out; ++co)
    for (int ci = 0; ci < s.c_in; ++ci)
      for (int t = 0; t < taps; ++t)
        w[(size_t(co) * taps + t) * pitch + ci] = weight[(size_t(co) * s.c_in + ci) * taps + t];
  if (type == ActivationType::f32)
    for (float& v : w) {
      float hi, lo;
      split_tf32(v, hi, lo);
      v = low ? lo : hi;
    }
  return to_activation_bytes(w, type);
}

// BN of the tile rule (conv2d_nhwc_tiles): it depends on C_out (and a fixed block_n) only.
int channel_tile(int c_out, int block_n) {
  return block_n ? block_n : c_out <= 16 ? 16 : c_out <= 32 ? 32 : c_out <= 64 ? 64 : 128;
}

// `kernel`<DT, K, BN, BK, STAGES(, consumers)> of a shape (no consumers argument when 0).
std::string instance_name(const char* kernel, ActivationType type, const Conv2dShape& s, int consumers,
                          int block_n) {
  const Conv2dNhwcTiles t = conv2d_nhwc_tiles(type, s.c_in, s.c_out, block_n);
  return std::string(kernel) + "<" + activation_template_arg(type) + ", " + std::to_string(s.kernel) + ", " +
         std::to_string(t.bn) + ", " + std::to_string(t.bk) + ", " + std::to_string(t.stages) +
         (consumers ? ", " + std::to_string(consumers) : "") + ">";
}

// Whether an op at `block_n` also compiles and may run the rule's narrow channel tile: at auto where the tile
// rule's BN is wider.
bool narrows(const Conv2dShape& s, int block_n) {
  return block_n == 0 && channel_tile(s.c_out, 0) > kConv2dNhwcBlockNRule.narrow_bn;
}

// Throws UsageError unless a run of `split.splits` can go: the shape has that many reduction steps, the pixel
// tile is 64, and the workspace is given (16-byte aligned partials).
void check_split(ActivationType type, const Conv2dShape& s, const Conv2dNhwcSplitK& split, int block_m) {
  const int steps = conv2d_nhwc_steps(type, s);
  if (split.splits < 1 || split.splits > steps)
    throw UsageError("conv2d_nhwc: SPLIT_K " + std::to_string(split.splits) + " is not between 1 and the " +
                     std::to_string(steps) + " reduction steps of this shape (K*K x ceil(C_IN / BK))");
  if (split.splits == 1) return;
  if (block_m != 0 && block_m != 64)
    throw UsageError("conv2d_nhwc: split-K runs at BLOCK_M 64, not " + std::to_string(block_m));
  if (!split.partial || !split.arrivals || reinterpret_cast<uintptr_t>(split.partial) % 16 != 0)
    throw UsageError("conv2d_nhwc: split-K needs its workspace (16-byte aligned partials and the counters)");
}

}  // namespace

void check_nhwc_view(const std::string& op, const char* name, const NhwcView& v, int channels) {
  if (!v.data) throw UsageError(op + ": the " + name + " tensor is not set");
  if (v.pitch < channels || v.pitch % 8 != 0)
    throw UsageError(op + ": the " + name + " pitch " + std::to_string(v.pitch) +
                     " is not a multiple of 8 of at least its " + std::to_string(channels) + " channels");
  if (reinterpret_cast<uintptr_t>(v.data) % 16 != 0)
    throw UsageError(op + ": the " + name +
                     " tensor is not 16-byte aligned (a channel offset not a multiple of 8?)");
}

void check_conv_arguments(const std::string& op, const std::string& problem, const Conv2dShape& s,
                          const std::vector<float>& weight, const std::vector<float>& bias) {
  if (!problem.empty()) throw UsageError(problem);
  if (weight.size() != size_t(s.weight_count()) || bias.size() != size_t(s.c_out))
    throw UsageError(op + ": " + std::to_string(weight.size()) + " weights and " +
                     std::to_string(bias.size()) + " biases given, the shape needs " +
                     std::to_string(s.weight_count()) + " and " + std::to_string(s.c_out));
}

int nhwc_min_pitch(int channels) {
  return (channels + 7) / 8 * 8;
}

void check_nhwc_view(const char* op, const char* name, const NhwcView& v, int channels) {
  if (!v.data) throw UsageError(std::string(op) + ": the " + name + " tensor is not set");
  if (v.pitch < channels || v.pitch % 8 != 0)
    throw UsageError(std::string(op) + ": the " + name + " pitch " + std::to_string(v.pitch) +
                     " is not a multiple of 8 of at least its " + std::to_string(channels) + " channels");
  if (reinterpret_cast<uintptr_t>(v.data) % 16 != 0)
    throw UsageError(std::string(op) + ": the " + name +
                     " tensor is not 16-byte aligned (a channel offset not a multiple of 8?)");
}

Conv2dNhwcTiles conv2d_nhwc_tiles(ActivationType type, int c_in, int c_out, int block_n) {
  const int bn = channel_tile(c_out, block_n);
  // Rows of 128 bytes where C_in fills them, else 64 or 32. f32's stages hold four operand tiles: with
  // 128-byte rows three of them (up to 193 KB at BN 128, two consumers). Measured on the H200 (2026-12-03,
  // batch 32 fp32 NHWC): 6.48 ms with 128-byte rows and 3 stages against 6.77 with 64-byte rows and 4 (half
  // the steps, so half the waits for each step's products), worst tensor 7.0e-6 against 4.0e-6 (each fresh
  // accumulator sums twice the products inside wgmma), both under the 1e-5 bar.
  int bk = c_in > 32 ? 64 : c_in > 16 ? 32 : 16;  // 16-bit channels
  if (type == ActivationType::tf32 || type == ActivationType::f32) bk = c_in > 16 ? 32 : c_in > 8 ? 16 : 8;
  return {bn, bk, type == ActivationType::f32 && bk == 32 ? 3 : kStages};
}

std::string conv2d_nhwc_problem(const Conv2dShape& s) {
  if (s.groups != 1)
    return "conv2d_nhwc: dense convolutions only (GROUPS 1), not GROUPS " + std::to_string(s.groups);
  if (s.kernel == 1 && s.stride != 1)
    return "conv2d_nhwc: a 1x1 conv has stride 1, not " + std::to_string(s.stride);
  if (s.kernel != 1 && s.kernel != 3)
    return "conv2d_nhwc: kernel size 1 or 3, not " + std::to_string(s.kernel);
  if (s.stride != 1 && s.stride != 2) return "conv2d_nhwc: stride 1 or 2, not " + std::to_string(s.stride);
  if (s.c_out % 8 != 0)
    return "conv2d_nhwc: C_OUT a multiple of 8 (16-byte output rows), not " + std::to_string(s.c_out);
  return "";
}

int conv2d_nhwc_block_m(int64_t m, int c_out, int multiprocessors, int block_n) {
  const int bn = channel_tile(c_out, block_n);
  return (m + 127) / 128 * ((c_out + bn - 1) / bn) >= multiprocessors ? 128 : 64;
}

int conv2d_nhwc_block_n(int64_t m, int c_out, int multiprocessors) {
  const int wide = channel_tile(c_out, 0);
  if (wide <= kConv2dNhwcBlockNRule.narrow_bn) return wide;
  const int block_m = conv2d_nhwc_block_m(m, c_out, multiprocessors, wide);
  const int64_t tiles = (m + block_m - 1) / block_m * ((c_out + wide - 1) / wide);
  return tiles < int64_t(kConv2dNhwcBlockNRule.min_tiles_per_sm) * multiprocessors
             ? kConv2dNhwcBlockNRule.narrow_bn
             : wide;
}

int64_t conv2d_nhwc_grid(int64_t tiles, int bn, int block_m, int multiprocessors, int operands) {
  return std::min<int64_t>(tiles,
                           int64_t(multiprocessors) * conv2d_nhwc_ctas_per_sm(bn, block_m / 64, operands));
}

int conv2d_nhwc_steps(ActivationType type, const Conv2dShape& s) {
  const int bk = conv2d_nhwc_tiles(type, s.c_in, s.c_out).bk;
  return s.kernel * s.kernel * ((s.c_in + bk - 1) / bk);
}

int conv2d_nhwc_split_k(ActivationType type, int64_t m, const Conv2dShape& s, int multiprocessors,
                        int max_splits, int block_n) {
  const int bn = channel_tile(s.c_out, block_n);
  const int64_t tiles = (m + 63) / 64 * ((s.c_out + bn - 1) / bn);
  const int steps = conv2d_nhwc_steps(type, s);
  int splits = 1;
  while (2 * splits <= max_splits && tiles * 2 * splits <= multiprocessors &&
         steps >= 2 * splits * kConv2dNhwcSplitRule.min_steps)
    splits *= 2;
  return splits;
}

std::string conv2d_nhwc_instance(ActivationType type, const Conv2dShape& s, int block_m, int block_n) {
  return instance_name("conv2d_nhwc", type, s, block_m / 64, block_n);
}

std::string conv2d_nhwc_splitk_instance(ActivationType type, const Conv2dShape& s, int block_n) {
  return instance_name("conv2d_nhwc_splitk", type, s, 0, block_n);
}

CompileRequest conv2d_nhwc_compile_request(ActivationType type, const Conv2dShape& s, int block_n) {
  CompileRequest r{
      kSource, {}, {conv2d_nhwc_instance(type, s, 64, block_n), conv2d_nhwc_instance(type, s, 128, block_n)}};
  if (conv2d_nhwc_steps(type, s) >= 2)
    r.name_expressions.push_back(conv2d_nhwc_splitk_instance(type, s, block_n));
  if (narrows(s, block_n))
    for (int block_m : {64, 128})
      r.name_expressions.push_back(conv2d_nhwc_instance(type, s, block_m, kConv2dNhwcBlockNRule.narrow_bn));
  r.arch_specific = true;
  return r;
}

Conv2dNhwcOp::Conv2dNhwcOp(Backend& backend, const Conv2dShape& shape, ActivationType type,
                           const std::vector<float>& weight, const std::vector<float>& bias, int block_n)
    : backend_(backend),
      shape_(shape),
      type_(type),
      block_n_(block_n),
      tiles_(conv2d_nhwc_tiles(type, shape.c_in, shape.c_out, block_n)) {
  check_conv_arguments("conv2d_nhwc", conv2d_nhwc_problem(shape), shape, weight, bias);
  if (block_n != 0 && block_n != 16 && block_n != 32 && block_n != 64 && block_n != 128)
    throw UsageError("conv2d_nhwc: block_n is 16, 32, 64 or 128 (or 0: by C_out), not " +
                     std::to_string(block_n));
  module_ = backend.compile(conv2d_nhwc_compile_request(type, shape, block_n));
  if (conv2d_nhwc_steps(type, shape) >= 2)
    kernel_splitk_ = module_->kernel(conv2d_nhwc_splitk_instance(type, shape, block_n));
  weight_ = backend.upload_vector(kernel_weights(shape, type, weight));
  if (type == ActivationType::f32)
    weight_lo_ = backend.upload_vector(kernel_weights(shape, type, weight, true));
  bias_ = backend.upload_vector(bias);
  wide_ = tiling(tiles_);
  if (narrows(shape, block_n))
    narrow_ = tiling(conv2d_nhwc_tiles(type, shape.c_in, shape.c_out, kConv2dNhwcBlockNRule.narrow_bn));
}

Conv2dNhwcOp::Tiling Conv2dNhwcOp::tiling(const Conv2dNhwcTiles& t) const {
  const Conv2dShape& s = shape_;
  const int taps = s.kernel * s.kernel, pitch = nhwc_min_pitch(s.c_in);
  const uint64_t row_bytes = uint64_t(pitch) * uint64_t(activation_bytes(type_));
  auto weight_map = [&](const DeviceBuffer& weights) {
    TensorMapDesc wd =
        dense_tensor_map(element_of(type_), weights, {uint64_t(s.c_in), uint64_t(taps), uint64_t(s.c_out)},
                         {uint32_t(t.bk), 1, uint32_t(t.bn)});
    wd.strides = {row_bytes, row_bytes * taps, 0, 0};
    wd.swizzle = swizzle_of(type_, t.bk);
    wd.l2_promotion = TensorL2Promotion::B256;
    return backend_.tensor_map(wd);
  };
  const TensorMap hi = weight_map(weight_);
  return {t, module_->kernel(conv2d_nhwc_instance(type_, s, 64, t.bn)),
          module_->kernel(conv2d_nhwc_instance(type_, s, 128, t.bn)), hi,
          type_ == ActivationType::f32 ? weight_map(weight_lo_) : hi};
}

TensorMap Conv2dNhwcOp::input_map(const InputKey& key) const {
  if (last_input_map_ && last_input_map_->first == key) return last_input_map_->second;
  const Conv2dShape& s = shape_;
  const int64_t pixels = int64_t(key.batch) * key.h * key.w;
  const DeviceBuffer x = span_of(type_, {key.data, key.pitch}, pixels, s.c_in);
  const uint64_t pitch_bytes = uint64_t(key.pitch) * uint64_t(activation_bytes(type_));
  TensorMapDesc xd;
  if (s.kernel == 1) {
    xd = dense_tensor_map(element_of(type_), x, {uint64_t(s.c_in), uint64_t(pixels)},
                          {uint32_t(tiles_.bk), uint32_t(key.block_m)});
    xd.strides[0] = pitch_bytes;
  } else {
    xd = dense_tensor_map(element_of(type_), x,
                          {uint64_t(s.c_in), uint64_t(key.w), uint64_t(key.h), uint64_t(key.batch)}, {});
    xd.strides = {pitch_bytes, pitch_bytes * key.w, pitch_bytes * key.w * key.h, 0};
    xd.im2col = true;
    // The first tap's positions: from -1 (the padding) to the last whose 3x3 window still ends inside.
    xd.pixels.lower = {-1, -1, 0};
    xd.pixels.upper = {-1, -1, 0};
    xd.pixels.channels_per_pixel = uint32_t(tiles_.bk);
    xd.pixels.pixels_per_column = uint32_t(key.block_m);
    xd.element_strides = {1, uint32_t(s.stride), uint32_t(s.stride), 1, 1};
  }
  xd.swizzle = swizzle_of(type_, tiles_.bk);
  xd.l2_promotion = TensorL2Promotion::B256;
  last_input_map_.emplace(key, backend_.tensor_map(xd));
  return last_input_map_->second;
}

int Conv2dNhwcOp::split_k(int batch, int h, int w, int max_splits) const {
  const int64_t m = int64_t(batch) * shape_.out_size(h) * shape_.out_size(w);
  return conv2d_nhwc_split_k(type_, m, shape_, backend_.device().multiprocessors, max_splits, block_n_);
}

int Conv2dNhwcOp::block_n(int batch, int h, int w) const {
  if (!narrow_) return tiles_.bn;
  const int64_t m = int64_t(batch) * shape_.out_size(h) * shape_.out_size(w);
  return conv2d_nhwc_block_n(m, shape_.c_out, backend_.device().multiprocessors);
}

Conv2dNhwcSplitSizes Conv2dNhwcOp::split_sizes(int batch, int h, int w, int splits) const {
  if (splits <= 1) return {};
  const int64_t m = int64_t(batch) * shape_.out_size(h) * shape_.out_size(w);
  const size_t tiles = size_t((m + 63) / 64) * size_t((shape_.c_out + tiles_.bn - 1) / tiles_.bn);
  return {tiles * size_t(splits) * 64 * size_t(tiles_.bn), tiles};
}

void Conv2dNhwcOp::run(int batch, int h, int w, NhwcView in, NhwcView out, NhwcView residual, int block_m,
                       const Conv2dNhwcSplitK& split) const {
  const Conv2dShape& s = shape_;
  const int ho = s.out_size(h), wo = s.out_size(w);
  const int64_t m = int64_t(batch) * ho * wo;
  check_nhwc_view("conv2d_nhwc", "input", in, s.c_in);
  check_nhwc_view("conv2d_nhwc", "output", out, s.c_out);
  if (residual.data) check_nhwc_view("conv2d_nhwc", "residual", residual, s.c_out);
  if (block_m != 0 && block_m != 64 && block_m != 128)
    throw UsageError("conv2d_nhwc: block_m is 64 or 128 (or 0: by size), not " + std::to_string(block_m));
  check_split(type_, s, split, block_m);
  const int sms = backend_.device().multiprocessors;
  const Tiling& tiling =
      split.splits == 1 && narrow_ && block_n(batch, h, w) == narrow_->tiles.bn ? *narrow_ : wide_;
  const Conv2dNhwcTiles& t = tiling.tiles;
  const int bm = split.splits > 1 ? 64 : block_m ? block_m : conv2d_nhwc_block_m(m, s.c_out, sms, t.bn);

  const int n_tiles = (s.c_out + t.bn - 1) / t.bn;
  const int64_t tiles = (m + bm - 1) / bm * n_tiles;
  const Conv2dNhwcParams p{input_map({in.data, in.pitch, batch, h, w, bm}),
                           tiling.weight_map,
                           tiling.weight_lo_map,
                           bias_.as<const float>(),
                           residual.data,
                           out.data,
                           int(m),
                           n_tiles,
                           int(tiles),
                           s.c_out,
                           ho,
                           wo,
                           s.stride,
                           (s.c_in + t.bk - 1) / t.bk,
                           out.pitch,
                           residual.pitch,
                           s.silu ? 1 : 0};
  const int64_t grid =
      split.splits > 1  // split-K: each tile's reduction over `splits` CTAs
          ? std::min<int64_t>(tiles * split.splits, int64_t(sms) * conv2d_nhwc_splitk_ctas_per_sm())
          : conv2d_nhwc_grid(tiles, t.bn, bm, sms, operands_of(type_));
  const LaunchConfig cfg{
      {unsigned(grid), 1, 1},
      {unsigned(128 + 2 * bm), 1, 1},  // the producer and bm / 64 consumer warpgroups
      conv2d_nhwc_shared_bytes(bm, t.bn, t.bk * activation_bytes(type_), operands_of(type_), t.stages),
      /*programmatic_dependent=*/true};  // the kernel waits for its predecessor
  if (split.splits > 1)
    backend_.launch(*kernel_splitk_, cfg,
                    kernel_params(Conv2dNhwcSplitParams{p, split.partial, split.arrivals, split.splits}));
  else
    backend_.launch(bm == 64 ? tiling.kernel_64 : tiling.kernel_128, cfg, kernel_params(p));
}

}  // namespace lab
