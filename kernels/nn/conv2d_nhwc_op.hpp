// Conv2dNhwcOp: one dense Conv2d layer (1x1 stride 1, or 3x3 stride 1 or 2; folded BN bias, optional SiLU,
// optional residual) on NHWC fp16 / bf16 or float (tf32 products) activations through conv2d_nhwc.cu,
// Hopper's wgmma + TMA implicit GEMM (sm_90a). The float32 weights [C_out][C_in][K][K] are converted once at
// construction to the kernel's [C_out][K*K][C_in] layout in the activations' type (rows padded to 8 channels
// with zeros) and their tensor map made; run()
// makes the input's map when the input (pointer, pitch, batch, size) or the pixel tile differs from the last
// run's, and launches. The tile rule (conv2d_nhwc_tiles) and the instance name are shared with the
// conv2d_nhwc runner (conv2d_nhwc_runner.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/activation_type.hpp"
#include "kernels/nn/conv2d_shape.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// An NHWC tensor of the op's element type (or a channel slice of one): element (pixel, c) at data[pixel *
// pitch + c]; data and pitch 16-byte aligned (pitch and the slice's channel offset multiples of 8).
struct NhwcView {
  void* data = nullptr;  // 16-bit or float elements, as the op taking the view says
  int pitch = 0;
};

// The tiles of one layer: BN output channels (16, 32, 64 or 128: the smallest that covers C_out, 128 above;
// or block_n when given, one of those), BK input channels per copy (rows of 128 bytes where C_in fills them,
// else 64 or 32: 16-bit 64 above 32 channels, 32 above 16, else 16; float half those) and the pipeline depth.
struct Conv2dNhwcTiles {
  int bn, bk, stages;
};
Conv2dNhwcTiles conv2d_nhwc_tiles(ActivationType type, int c_in, int c_out, int block_n = 0);
// Empty when conv2d_nhwc runs the shape, else the rule it breaks (one line).
std::string conv2d_nhwc_problem(const Conv2dShape& s);
// Output pixels per CTA for M output pixels: 128 (two consumer warpgroups) when ceil(M / 128) x the N tiles
// fill `multiprocessors` SMs, else 64 (one consumer, twice the CTAs). block_n as conv2d_nhwc_tiles takes it.
int conv2d_nhwc_block_m(int64_t m, int c_out, int multiprocessors, int block_n = 0);
// The channel-tile rule (issue 18): where a layer's BN-128 tiles, at the BLOCK_M conv2d_nhwc_block_m picks
// for them, number fewer than min_tiles_per_sm x the SMs, Conv2dNhwcOp at auto BN runs narrow_bn channels a
// tile (twice the CTAs on the idle SMs; BLOCK_M then by conv2d_nhwc_block_m at that BN). Measured on the H200
// (2026-12-02, `lab bench conv2d_nhwc --param H=20 --param W=20 --iters 200`, batch 1): 1x1 256->256 14.1 us
// at BN 128, 11.5 at BN 64; 3x3 128->128 19.9 / 14.9; at batch 1 the 20x20 and 40x40 levels' convs ran on
// 7-50 CTAs of 132 SMs. Batch 32's grids fill the SMs and keep BN 128. The threshold (one tile an SM) was
// checked by the whole-forward A/B (LAB_CONV_BLOCK_N, nhwc_ops.hpp): batch 1 fp16 0.744 -> 0.612 ms, bf16
// 0.762 -> 0.627, batch 32 unchanged at 3.38 ms (H200, docs/PERFORMANCE.md, fourteenth session).
struct Conv2dNhwcBlockNRule {
  int narrow_bn;
  int min_tiles_per_sm;
};
inline constexpr Conv2dNhwcBlockNRule kConv2dNhwcBlockNRule{64, 1};
// The rule's BN for M output pixels of C_out channels: conv2d_nhwc_tiles' BN, or narrow_bn where that is
// wider and its tiles leave SMs idle.
int conv2d_nhwc_block_n(int64_t m, int c_out, int multiprocessors);
// The persistent grid of a layer of `tiles` output tiles (BN channels x BLOCK_M pixels): as many CTAs as
// `multiprocessors` SMs hold (conv2d_nhwc_ctas_per_sm), fewer when there are fewer tiles.
// `operands` 2 for f32's 3xTF32 instances (conv2d_nhwc_ctas_per_sm).
int64_t conv2d_nhwc_grid(int64_t tiles, int bn, int block_m, int multiprocessors, int operands = 1);
// The reduction steps of one output tile: taps x ceil(C_in / BK) channel blocks.
int conv2d_nhwc_steps(ActivationType type, const Conv2dShape& s);

// The split-K rule (issue 18): at batch 1 the 20x20 level's convs have 7-14 output tiles for 132 SMs, each
// launch a latency chain through a few SMs (SM throughput 0.3-2 %), not work. Such a layer splits each tile's
// reduction over S CTAs (conv2d_nhwc_splitk): S doubles from 1 while 2S stays within max_splits, the tiles at
// BLOCK_M 64 times 2S still fit one CTA per SM (more would queue behind each other, and the split pays only
// while CTAs run side by side), and every slice keeps at least min_steps reduction steps (a slice's fixed
// cost, the pipeline's first loads and the float32 partial's store and re-read, wants some products to hide
// behind). The network applies it with max_splits from LAB_CONV_SPLIT_K (nhwc_ops.hpp), by default this one.
struct Conv2dNhwcSplitRule {
  int max_splits;
  int min_steps;
};
inline constexpr Conv2dNhwcSplitRule kConv2dNhwcSplitRule{8, 2};
// The rule's S for M output pixels (1: no split) under the limit max_splits (1 turns it off); block_n as
// conv2d_nhwc_tiles takes it.
int conv2d_nhwc_split_k(ActivationType type, int64_t m, const Conv2dShape& s, int multiprocessors,
                        int max_splits, int block_n = 0);

// A split-K run's workspace: `partial` floats (tiles x splits x 64 x BN, float4-aligned) and `arrivals`
// counters (one per tile, zero before the first run; every run leaves them zero). A lane's convs run one
// after another and may share one (Programmatic Dependent Launch orders each conv's workspace use after the
// previous conv's completion); convs running side by side need their own.
struct Conv2dNhwcSplitK {
  int splits = 1;  // 1: whole tiles, no workspace
  float* partial = nullptr;
  unsigned* arrivals = nullptr;
};
struct Conv2dNhwcSplitSizes {
  size_t partial_floats = 0, arrivals = 0;
};

// The kernel name expression of a shape at a pixel tile of 64 or 128: conv2d_nhwc<DT, K, BN, BK, STAGES,
// BLOCK_M / 64>, and of its split-K mode: conv2d_nhwc_splitk<DT, K, BN, BK, STAGES>; the request compiling
// both tiles' instances, (when the reduction has 2 steps or more) the split-K one and, at block_n 0 (auto)
// where the tile rule's BN is wider than kConv2dNhwcBlockNRule.narrow_bn, both pixel tiles at that narrow BN
// (one module). block_n as conv2d_nhwc_tiles takes it.
std::string conv2d_nhwc_instance(ActivationType type, const Conv2dShape& s, int block_m, int block_n = 0);
std::string conv2d_nhwc_splitk_instance(ActivationType type, const Conv2dShape& s, int block_n = 0);
CompileRequest conv2d_nhwc_compile_request(ActivationType type, const Conv2dShape& s, int block_n = 0);
// Throws UsageError with `problem` (a shape rule's message) unless it is empty, or ("<op>: N weights and M
// biases given, ...") unless weight [c_out, c_in / groups, k, k] and bias [c_out] have the shape's sizes.
void check_conv_arguments(const std::string& op, const std::string& problem, const Conv2dShape& s,
                          const std::vector<float>& weight, const std::vector<float>& bias);
// Throws UsageError ("<op>: the <name> ...") unless v is set, 16-byte aligned, and its pitch a multiple of 8
// of at least `channels`.
void check_nhwc_view(const std::string& op, const char* name, const NhwcView& v, int channels);
// The pitch (channels per pixel) an NHWC tensor of `channels` needs at least: rounded up to 8.
int nhwc_min_pitch(int channels);
// Throws UsageError naming `op` and the tensor (`name`: "input", "output" ...) unless v is set, 16-byte
// aligned, and its pitch a multiple of 8 of at least `channels`.
void check_nhwc_view(const char* op, const char* name, const NhwcView& v, int channels);

class Conv2dNhwcOp {
 public:
  // weight [c_out, c_in, k, k], bias [c_out] (float32); throws UsageError on a shape conv2d_nhwc_problem
  // refuses or wrong weight / bias sizes. block_n: the output channels of a tile (16, 32, 64 or 128), fixed;
  // 0 (auto): per run, conv2d_nhwc_block_n's (the tile rule's BN, or the narrow one where it leaves SMs
  // idle).
  Conv2dNhwcOp(Backend& backend, const Conv2dShape& shape, ActivationType type,
               const std::vector<float>& weight, const std::vector<float>& bias, int block_n = 0);

  // out = act(conv(in) + bias) (+ residual when residual.data); in [batch, h, w, c_in], out and residual
  // [batch, ho, wo, c_out] (ho = shape.out_size(h)); views as NhwcView says. block_m: 64 or 128 output
  // pixels per CTA, 0 for conv2d_nhwc_block_m's choice (at the run's BN: block_n(batch, h, w)).
  // split.splits > 1: split-K over that many CTAs a tile (BLOCK_M 64, BN tiles().bn) with split's workspace
  // (split_sizes). Throws UsageError on a pitch below the channels or
  // not a multiple of 8, a pointer not 16-byte aligned, or a split the shape or the workspace cannot take.
  void run(int batch, int h, int w, NhwcView in, NhwcView out, NhwcView residual = {}, int block_m = 0,
           const Conv2dNhwcSplitK& split = {}) const;

  // The split-K rule's S for a run at this input size (conv2d_nhwc_split_k), and the workspace a run of
  // `splits` needs (empty for 1).
  int split_k(int batch, int h, int w, int max_splits) const;
  // The output channels of a tile in a whole-tile run at this input size: the fixed block_n, else
  // conv2d_nhwc_block_n's.
  int block_n(int batch, int h, int w) const;
  Conv2dNhwcSplitSizes split_sizes(int batch, int h, int w, int splits) const;

  const Conv2dShape& shape() const { return shape_; }
  // The tiles at the op's fixed block_n, or at auto the tile rule's (split-K runs take these).
  const Conv2dNhwcTiles& tiles() const { return tiles_; }

 private:
  // The instances and the weight map of one channel tile.
  struct Tiling {
    Conv2dNhwcTiles tiles;
    Kernel kernel_64, kernel_128;  // one and two consumer warpgroups
    TensorMap weight_map;          // box BK x 1 x BN
    TensorMap weight_lo_map;       // f32: the weights' remainders (3xTF32), else weight_map again
  };
  Tiling tiling(const Conv2dNhwcTiles& tiles) const;

  // The input (and pixel tile) a map was made for.
  struct InputKey {
    void* data;
    int pitch, batch, h, w, block_m;
    bool operator==(const InputKey&) const = default;
  };
  TensorMap input_map(const InputKey& key) const;

  Backend& backend_;
  Conv2dShape shape_;
  ActivationType type_;
  int block_n_;  // 0: the tile rule's BN
  Conv2dNhwcTiles tiles_;
  std::shared_ptr<Module> module_;
  std::optional<Kernel> kernel_splitk_;     // when the reduction has 2 steps or more
  DeviceBuffer weight_, weight_lo_, bias_;  // weight_lo_: f32's remainders (3xTF32)
  Tiling wide_;                             // at tiles_
  std::optional<Tiling> narrow_;            // at auto BN where the rule may narrow the tiles
  mutable std::optional<std::pair<InputKey, TensorMap>> last_input_map_;
};

}  // namespace lab
