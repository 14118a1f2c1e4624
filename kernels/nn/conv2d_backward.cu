// conv2d_backward: the backward of Conv2d (+ bias) (+ SiLU), float32 dense NCHW (conv2d_backward_params.cuh).
//
// With z = conv(x) + bias and y = silu(z) (or y = z), given dy:
//   dz[b, co, p]         = dy * silu'(z),  silu'(z) = s (1 + z (1 - s)), s = sigmoid(z)
//   dx[b, ci, iy, ix]    = sum_{co in ci's group, ky, kx : iy + K/2 - ky = oy*S, ix + K/2 - kx = ox*S}
//                          dz[b, co, oy, ox] * w[co, ci, ky, kx]
//   dw[co, ci, ky, kx]   = sum_{b, oy, ox} dz[b, co, oy, ox] * x[b, ci, oy*S - K/2 + ky, ox*S - K/2 + kx]
//   db[co]               = sum_{b, oy, ox} dz[b, co, oy, ox]
// Kernels:
//   conv2d_silu_bias_backward  dz from dy and the forward's z, and db from dz in the same pass: one CTA per
//                              (output channel, group of images), grid (C_out, groups), its 256 threads
//                              striding over the group's planes one after another (ChannelGroup; four loads
//                              in flight each; 16-byte loads of 4-pixel groups measured slower on the H200:
//                              2.69 -> 2.81 ms over a batch-32 iteration's 105 launches), then
//                              conv2d_bias_grad's sum and outputs. A group is one image where the plane
//                              holds 4096 pixels, else as many images as make 4096 (at a 20 x 20 plane, one
//                              image a CTA made waves of CTAs with under two items a thread).
//                              dy's images may be strided (the tape's concat slices); z and dz are dense.
//                              Both GEMMs read dz, so it is written once rather than recomputed in two
//                              prologues; summing db here saves conv2d_bias_grad's second read of it.
//   conv2d_dgrad_direct        v1: one thread per dx element, any K / stride / groups (depthwise included:
//                              its reduction is K*K taps). Grid (ceil(H*W / 256), C_in, B).
//   conv2d_dgrad_tiled<K, TM>  v2, groups == 1: implicit GEMM dx[ci, pixel] = sum_r w'[r, ci] * g[r, pixel]
//                              over r = (co, ky, kx), w' = the weights rearranged to [C_out*K*K, C_in] on the
//                              host, g the gathered dz (zero where the tap misses the stride grid or the
//                              output). A CTA owns TM input channels x TN = 4096/TM input pixels of one
//                              stride-phase class (the pixels with iy % S, ix % S fixed: DgradPhase), and its
//                              reduction runs over co x the taps that reach that class only (at stride 2, K
//                              3: 1, 2 or 4 of the 9 taps, where gathering all 9 left three quarters zero),
//                              tap by tap (DgradStaging: one output offset and bounds check a chunk). 16-row
//                              chunks, 4 x 4 accumulators per thread (FmaTile).
//                              Grid (ceil(ceil(H/S) * ceil(W/S) / TN), ceil(C_in / TM), B * S * S).
//   conv2d_wgrad_direct        v1: one CTA per weight element, its 256 threads striding over (b, output
//                              pixel), then a shared-memory tree sum (deterministic). Any K / stride /
//                              groups.
//   conv2d_wgrad_tiled<K, TM>  v2, groups == 1: implicit GEMM dw[co, r] = sum_q dz[q, co] * im2col[q, r] over
//                              q = (b, output pixel), r = (ci, ky, kx). A CTA owns TM output channels x
//                              TN = 4096/TM rows r, 16-item chunks, 4 x 4 per thread (FmaTile); each thread
//                              stages one item of every chunk (WgradStaging, ItemWalk), the CTA's im2col row
//                              offsets found once in shared memory (Im2colRow). 1x1 at stride 1 on planes of
//                              a multiple of 4 (aligned): a thread stages 4 (or 2, 1) consecutive items of a
//                              few channels instead, a float4 load a channel (WgradStaging1x1); same tiles.
//                              The reduction (B*Ho*Wo, up to 204,800 at batch 32 640) is split over grid z:
//                              each split (a multiple of 32 items) writes partial [split, C_out, R] and
//                              conv2d_wgrad_reduce adds the splits in index order. Split-K with a fixed-order
//                              reduction rather than float atomics: the gradients are bit-identical run to
//                              run (a resumed or repeated training step reproduces), at the cost of a
//                              workspace and one extra pass. Grid (ceil(R / TN), ceil(C_out / TM), splits),
//                              and with a bias gradient (dz not summed by a SiLU backward: no SiLU, or its
//                              backward folded into a reader's input gradient) one more column of CTAs,
//                              each summing db of its TM channels over its split (wgrad_bias_sums; split
//                              rows [split, C_out] beside the weights' partials); where WgradStaging1x1
//                              stages, the first tile column's CTAs sum db from the dz they load instead
//                              and that column returns at once.
//   conv2d_dgrad_mma<DT, K, TM>, conv2d_wgrad_mma<DT, K, TM>
//                              v3_fp16 (DT = LAB_F16) / v4_bf16 (LAB_BF16): v2's kernels (same staging order,
//                              tiles, grid and split-K) with the products on tensor cores: mma.sync m16n8k16,
//                              float accumulation (MmaTile). The staging rounds each value to DT once and
//                              stores 16-bit tiles, 32-row chunks; the warps load their fragments by
//                              transposed ldmatrix. dx and dW stay float32 (dW for the float32 master
//                              weights). The input gradient's weights come already rounded (w_half, the
//                              op's copy that the BatchNorm fold writes in 16 bits), one vector load and
//                              store a thread a chunk. Needs sm_80 or newer; the emulator runs its mma /
//                              ldmatrix model.
//   Every conv2d_dgrad_* with a gate (the pre-activation z under x = SiLU(z)) writes dx = silu'(z) * sum:
//   the producer's SiLU backward folded into this epilogue (the training tape's stride-2 readers).
//   conv2d_wgrad_narrow<DT, 3, NT>
//                              v3 / v4's weight gradient where it is narrow (groups 1, C_out <= 16, C_in * 9
//                              <= 8 NT): each warp streams its own k16 steps of items from global memory
//                              into mma.sync fragments, the warps' sums added in order at the end; with a
//                              bias gradient a second CTA per split sums db (wgrad_bias_sums).
//   The GEMMs (v2, v3, v4) are software-pipelined (pipelined_products): the operands of chunk c + 1 are
//   loaded from global memory into registers before chunk c's products and stored into the other of two
//   shared buffers after them, one __syncthreads a chunk; both operands are stored k-major, rows padded.
//   conv2d_wgrad_depthwise<K>  v5, depthwise (groups == C_in == C_out), K 3 / 5 / 7, any stride: one CTA per
//                              (channel, split of the B*Ho*Wo items), its 256 threads striding over the
//                              split's items (ItemWalk), each reading dz once and the K*K inputs under it and
//                              keeping all K*K sums (and dz's own: db) in registers; then per tap a warp
//                              butterfly and the 8 warps' sums in order. v1 gave each of the K*K taps its own
//                              CTA, each re-reading the whole dz and x planes. Split-K as v2 (partial [split,
//                              C, K*K], conv2d_wgrad_reduce), the splits sized for about three CTAs per SM.
//                              Grid (C, splits). Its input gradient is v1's conv2d_dgrad_direct (K*K taps per
//                              element already).
//   conv2d_wgrad_reduce        one thread per dw (then db) element: the splits summed in index order.
//   conv2d_bias_grad           db beside v1's weight gradient (v2-v5 sum it in their own launch): one CTA per
//                              (output channel, group of images, as above), 256 threads stride over the
//                              group's planes, tree sum, into grad_bias with one group, else into partial
//                              [groups, C_out], which the channel's last CTA adds in group order (one CTA per
//                              channel, the former form, left SMs idle: 26 ms of a 156 ms training iteration
//                              at batch 32).
#ifndef LAB_NN_CONV2D_BACKWARD_CU
#define LAB_NN_CONV2D_BACKWARD_CU
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/conv2d_backward_params.cuh"
#include "nn/nn_common.cuh"

namespace nn {

// The sum of one value per thread of the CTA (kThreads threads), in a fixed tree order; every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float sum = partial[0];
  __syncthreads();
  return sum;
}

// The products of the v2 / v3 / v4 GEMMs, C[m][n] += sum_k A[m][k] B[k][n] over one staged chunk of kChunk k,
// both operands stored k-major in shared memory (a[k * kLdA + m], b[k * kLdB + n], Element each), a CTA tile
// of TM x TN = 4096 results; element(v) is how the staging stores a value. store(m, n, value) hands each
// result of this thread to the kernel's epilogue. FmaTile (v2_tiled): float FMAs, 4 x 4 results per thread,
// float4 shared reads; rows padded by 4 floats so the wgrad staging's column stores (8 k x 4 m a warp) fall
// in distinct banks.
template <int TM, int TN>
struct FmaTile {
  using Element = float;
  static constexpr int kChunk = 16, kLdA = TM + 4, kLdB = TN + 4;
  float acc[4][4] = {};
  int ty, tx;

  __device__ __forceinline__ FmaTile() : ty(threadIdx.x / (TN / 4)), tx(threadIdx.x % (TN / 4)) {}

  __device__ __forceinline__ static float element(float v) { return v; }

  __device__ __forceinline__ void accumulate(const float* a, const float* b) {
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const float4 av4 = *reinterpret_cast<const float4*>(a + k * kLdA + ty * 4);
      const float4 bv4 = *reinterpret_cast<const float4*>(b + k * kLdB + tx * 4);
      const float av[4] = {av4.x, av4.y, av4.z, av4.w}, bv[4] = {bv4.x, bv4.y, bv4.z, bv4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }
  template <class Store>
  __device__ __forceinline__ void store(Store store) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) store(ty * 4 + i, tx * 4 + j, acc[i][j]);
  }
};

// MmaTile (v3_fp16 / v4_bf16): mma.sync m16n8k16 with float accumulation; warp w owns rows 16 (w / (8 /
// (TM/16))) .. + 15 and 32 columns. The staging rounds each value to DT once (round to nearest even) and
// stores the 16-bit pattern, so the activations and gradients stay float32 in memory; the fragments come by
// transposed ldmatrix from the k-major tiles, whose rows are padded by 8 elements (16 bytes) so the eight
// rows of each 8x8 matrix fall in distinct banks. 32-deep chunks: two k16 steps per barrier.
template <int DT, int TM, int TN>
struct MmaTile {
  using Element = uint16_t;
  static constexpr int kChunk = 32, kLdA = TM + 8, kLdB = TN + 8;
  static constexpr int kWarpCols = 8 / (TM / 16);
  static_assert(kWarpCols * 32 == TN, "each warp owns 16 rows x 32 columns");
  float d[4][4] = {};  // four n8 tiles: d[nt][0..1] row g, d[nt][2..3] row g + 8, columns 2t, 2t + 1
  int m0, n0, lane;

  __device__ __forceinline__ MmaTile() {
    const int warp = threadIdx.x / 32;
    lane = threadIdx.x % 32, m0 = (warp / kWarpCols) * 16, n0 = (warp % kWarpCols) * 32;
  }

  __device__ __forceinline__ static uint16_t element(float v) { return uint16_t(lab_pack2<DT>(v, 0.0f)); }
  // element(lo) | element(hi) << 16: two neighbours of a tile row in one 32-bit store.
  __device__ __forceinline__ static uint32_t element_pair(float lo, float hi) {
    return lab_pack2<DT>(lo, hi);
  }

  __device__ __forceinline__ void accumulate(const uint16_t* a, const uint16_t* b) {
#pragma unroll
    for (int k0 = 0; k0 < kChunk; k0 += 16) {
      // The A fragment (rows m0.., k0..) from a[k][m]: matrix i = lane / 8 holds m + 8 (i % 2), k + 8 (i /
      // 2).
      uint32_t af[4];
      lab_ldmatrix_x4_trans(af, a + (k0 + lane % 8 + (lane / 16) * 8) * kLdA + m0 + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        uint32_t bf[4];
        lab_load_b_rows_k<kLdB>(bf, b, n0 + pair * 16, k0, lane);
        lab_mma_16816_pair<DT>(d[2 * pair], d[2 * pair + 1], af, bf);
      }
    }
  }
  template <class Store>
  __device__ __forceinline__ void store(Store store) const {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) store(m0 + g + (e / 2) * 8, n0 + nt * 8 + 2 * t + e % 2, d[nt][e]);
  }
};

// The GEMM main loop of v2 / v3 / v4: `chunks` chunks of Tile::kChunk reduction rows, double buffered in
// shared memory (a_s, b_s) with a register prefetch. Staging::load() reads the next chunk from global memory
// into the thread's registers and advances; Staging::store(a, b) writes them (as Tile::Element) into one
// buffer pair. Chunk c + 1's loads are issued before chunk c's products and stored after them, so their
// latency hides behind the products; one barrier a chunk (buffer c % 2 is read while (c + 1) % 2 is written).
template <class Tile, class Staging>
__device__ __forceinline__ void pipelined_products(
    Tile& tile, Staging& staging, int chunks, typename Tile::Element (&a_s)[2][Tile::kChunk * Tile::kLdA],
    typename Tile::Element (&b_s)[2][Tile::kChunk * Tile::kLdB]) {
  if (chunks <= 0) return;
  staging.load();
  staging.store(a_s[0], b_s[0]);
  __syncthreads();
  for (int c = 0; c < chunks; ++c) {
    const bool more = c + 1 < chunks;
    if (more) staging.load();
    tile.accumulate(a_s[c % 2], b_s[c % 2]);
    if (more) staging.store(a_s[(c + 1) % 2], b_s[(c + 1) % 2]);
    __syncthreads();
  }
}

// The same with its own buffers (a kernel with two stagings hands both the same ones instead).
template <class Tile, class Staging>
__device__ __forceinline__ void pipelined_products(Tile& tile, Staging& staging, int chunks) {
  using Element = typename Tile::Element;
  __shared__ __align__(16) Element a_s[2][Tile::kChunk * Tile::kLdA];
  __shared__ __align__(16) Element b_s[2][Tile::kChunk * Tile::kLdB];
  pipelined_products(tile, staging, chunks, a_s, b_s);
}

// The stride-phase class of conv2d_dgrad_tiled's CTA (blockIdx.z % stride^2): the input pixels (iy, ix) with
// iy % stride == py and ix % stride == px, and the taps that reach them, ky = ky0, ky0 + stride, ... (ky0 =
// (py + K/2) % stride; likewise kx). Any other tap misses the stride grid, so the CTA's reduction runs over
// c_out x these taps only: at stride 2, K 3, 1, 2 or 4 taps of 9 (a quarter of the work on average). At stride
// 1 the one class is every pixel and every tap.
template <int K>
struct DgradPhase {
  int stride, py, px, ky0, kx0, nkx, taps, hc, wc;  // hc x wc: the class's pixels

  __device__ __forceinline__ DgradPhase(int phase, int s, int h_in, int w_in) : stride(s) {
    py = phase / s, px = phase % s;
    ky0 = (py + K / 2) % s, kx0 = (px + K / 2) % s;
    const int nky = ky0 < K ? (K - 1 - ky0) / s + 1 : 0;
    nkx = kx0 < K ? (K - 1 - kx0) / s + 1 : 0;
    taps = nky * nkx;
    hc = h_in > py ? (h_in - py + s - 1) / s : 0;
    wc = w_in > px ? (w_in - px + s - 1) / s : 0;
  }
  // Tap t of the class (t < taps) as ky * K + kx.
  __device__ __forceinline__ int tap(int t) const {
    return (ky0 + stride * (t / nkx)) * K + kx0 + stride * (t % nkx);
  }
  // The input pixel of class pixel p (p < hc * wc, at most 2^20 at 4096 x 4096): p / wc from a float
  // reciprocal, exact for such p to within one, then corrected (the epilogue finds one a result, and an
  // integer division by the class width took a quarter of a CTA's instructions at 2-8 chunks).
  __device__ __forceinline__ int pixel(int p, int w_in) const {
    int row = int(float(p) * (1.0f / float(wc))), column = p - row * wc;
    if (column < 0) --row, column += wc;
    else if (column >= wc) ++row, column -= wc;
    return (py + stride * row) * w_in + px + stride * column;
  }
};

// The staging of conv2d_dgrad's GEMM (v2, v3, v4). The CTA's reduction runs tap-major: chunk (t, co0) holds
// class tap t and output channels co0 .. + kChunk - 1 (zero past c_out), the taps outer. Every row of a chunk
// thus shares one tap: a thread finds its pixel's output offset and bounds once a chunk, and its loads are
// plain strides (weights K*K rows of w' [C_out*K*K, C_in] apart, dz one plane apart). A thread keeps one
// weight column (input channel ci0 + threadIdx.x % TM) and one dz column (class pixel threadIdx.x % TN).
// The vector of N 16-bit values (2, 4, 8) that one load or store moves.
template <int N>
struct HalfVectorOf;
template <>
struct HalfVectorOf<2> {
  using type = uint32_t;
};
template <>
struct HalfVectorOf<4> {
  using type = uint2;
};
template <>
struct HalfVectorOf<8> {
  using type = uint4;
};

template <int K, int TM, int TN, class Tile>
struct DgradStaging {
  static constexpr int kChunk = Tile::kChunk, kWeightRowStep = kThreads / TM, kGradRowStep = kThreads / TN;
  static constexpr int kWeights = kChunk / kWeightRowStep, kGrads = kChunk / kGradRowStep;
  static_assert(kThreads % TM == 0 && kThreads % TN == 0 && kWeights * kWeightRowStep == kChunk &&
                    kGrads * kGradRowStep == kChunk,
                "each thread stages whole rows of one fixed column of each operand");
  // 16-bit weights (v3 / v4: w_half, rounded on the host): a thread copies kHalves consecutive ones of one
  // row, kChunk rows of TM a chunk, with one load and one store where C_in keeps them aligned.
  static constexpr bool kHalfWeights = sizeof(typename Tile::Element) == 2;
  static constexpr int kHalves = TM * kChunk / kThreads, kHalfRow = kThreads / (TM / kHalves);
  static_assert(!kHalfWeights || (kHalves * kThreads == TM * kChunk && kHalfRow == kChunk &&
                                  (kHalves == 2 || kHalves == 4 || kHalves == 8)),
                "the threads cover the chunk's weight rows once, a 4, 8 or 16-byte vector each");
  using HalfVector = typename HalfVectorOf<kHalfWeights ? kHalves : 2>::type;
  const lab::Conv2dDgradParams& params;
  const DgradPhase<K>& phase;
  const float* dz_b;
  int w_col, g_col, ci, sy, sx, tap_index = 0, co0 = 0;
  bool pixel_valid;
  float weights[kHalfWeights ? 1 : kWeights], grads[kGrads];
  HalfVector half_weights;

  __device__ __forceinline__ DgradStaging(const lab::Conv2dDgradParams& p, const DgradPhase<K>& ph,
                                          const float* dz_image, int ci0, int px0)
      : params(p), phase(ph), dz_b(dz_image) {
    w_col = kHalfWeights ? threadIdx.x % (TM / kHalves) * kHalves : threadIdx.x % TM;
    g_col = threadIdx.x % TN, ci = ci0 + w_col;
    const int pixel = px0 + g_col;
    pixel_valid = pixel < ph.hc * ph.wc;
    sy = pixel_valid ? pixel / ph.wc : 0;
    sx = pixel_valid ? pixel % ph.wc : 0;
  }

  // The chunks of the CTA's reduction.
  __device__ __forceinline__ int chunks() const {
    return phase.taps * ((params.size.c_out + kChunk - 1) / kChunk);
  }

  // This thread's 16-bit weights of row co (tap `tap`): one vector load where C_in is a multiple of the
  // vector (then the vector is wholly inside or past C_in), else one at a time; zeros outside.
  __device__ __forceinline__ void load_half_weights(int tap, int co) {
    const lab::Conv2dBackwardSizes& n = params.size;
    const uint16_t* w = params.w_half + ((long long)co * K * K + tap) * n.c_in + ci;
    if (n.c_in % kHalves == 0) {
      half_weights = co < n.c_out && ci < n.c_in ? *reinterpret_cast<const HalfVector*>(w) : HalfVector{};
      return;
    }
    uint16_t v[kHalves];
#pragma unroll
    for (int e = 0; e < kHalves; ++e) v[e] = co < n.c_out && ci + e < n.c_in ? w[e] : uint16_t(0);
    uint32_t packed[kHalves / 2];
#pragma unroll
    for (int e = 0; e < kHalves / 2; ++e) packed[e] = uint32_t(v[2 * e]) | uint32_t(v[2 * e + 1]) << 16;
    half_weights = *reinterpret_cast<const HalfVector*>(packed);
  }

  // Chunk (tap_index, co0) into registers, then on to the next chunk. The tap (ky, kx) reaches output row oy
  // = sy + (py + K/2 - ky) / stride, an exact division.
  __device__ __forceinline__ void load() {
    const lab::Conv2dBackwardSizes& n = params.size;
    const int tap = phase.tap(tap_index), ky = tap / K, kx = tap % K;
    const int oy = sy + (phase.py + K / 2 - ky) / phase.stride,
              ox = sx + (phase.px + K / 2 - kx) / phase.stride;
    const bool inside = pixel_valid && oy >= 0 && oy < n.h_out && ox >= 0 && ox < n.w_out;
    const float* dz_pixel = dz_b + (inside ? oy * n.w_out + ox : 0);
    const int g_row0 = threadIdx.x / TN;
    if constexpr (kHalfWeights) {
      load_half_weights(tap, co0 + threadIdx.x / (TM / kHalves));
    } else {
      const float* w_tap = params.w + (long long)tap * n.c_in + ci;  // row co * K*K + tap of w'
      const int w_row0 = threadIdx.x / TM;
#pragma unroll
      for (int j = 0; j < kWeights; ++j) {
        const int co = co0 + w_row0 + j * kWeightRowStep;
        weights[j] = ci < n.c_in && co < n.c_out ? w_tap[(long long)co * K * K * n.c_in] : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kGrads; ++j) {
      const int co = co0 + g_row0 + j * kGradRowStep;
      grads[j] = inside && co < n.c_out ? dz_pixel[(long long)co * n.h_out * n.w_out] : 0.0f;
    }
    co0 += kChunk;
    if (co0 >= n.c_out) co0 = 0, ++tap_index;
  }

  // The loaded chunk as the A (weights, rows co, columns ci) and B (dz, rows co, columns pixel) tiles.
  __device__ __forceinline__ void store(typename Tile::Element* a, typename Tile::Element* b) const {
    const int g_row0 = threadIdx.x / TN;
    if constexpr (kHalfWeights) {
      *reinterpret_cast<HalfVector*>(a + threadIdx.x / (TM / kHalves) * Tile::kLdA + w_col) = half_weights;
    } else {
      const int w_row0 = threadIdx.x / TM;
#pragma unroll
      for (int j = 0; j < kWeights; ++j)
        a[(w_row0 + j * kWeightRowStep) * Tile::kLdA + w_col] = Tile::element(weights[j]);
    }
#pragma unroll
    for (int j = 0; j < kGrads; ++j)
      b[(g_row0 + j * kGradRowStep) * Tile::kLdB + g_col] = Tile::element(grads[j]);
  }
};

// The reduction items q = (b, output pixel) one thread visits, kStep apart from q_first: the staging row of
// every wgrad_gemm chunk (kStep = the chunk), or conv2d_wgrad_direct's and conv2d_wgrad_depthwise's stride
// over their items (kStep = kThreads). The image and output row and column advance without a division (the
// per-item 64-bit divisions they replace were most of the GEMM's and v1's instructions).
template <int kStep>
struct ItemWalk {
  long long q;
  int b, oy, ox, step_y, step_x;

  __device__ __forceinline__ ItemWalk(long long q_first, int h_out, int w_out) {
    q = q_first;
    const int plane_out = h_out * w_out;
    b = int(q / plane_out);
    const int p = int(q % plane_out);
    oy = p / w_out, ox = p % w_out;
    step_y = kStep / w_out, step_x = kStep % w_out;
  }
  __device__ __forceinline__ void advance(int h_out, int w_out) {
    q += kStep;
    ox += step_x, oy += step_y;
    if (ox >= w_out) ox -= w_out, ++oy;
    for (; oy >= h_out; oy -= h_out) ++b;
  }
};

// The im2col rows r = rc0 + rr (rr < TN) of conv2d_wgrad's CTA, found once before the reduction: the input
// offset ci * H*W + (ky - K/2) * W + kx - K/2 and the tap's bit ky * K + kx in an item's mask of in-image
// taps (WgradStaging); past the reduction (c_in * K*K rows) bit 31, never set. Read from shared memory each
// chunk rather than kept in registers: ptxas kept the three terms of every staged column live through the
// loop (up to 223 registers a thread).
struct Im2colRow {
  int offset, bit;
};

template <int K, int TN>
__device__ __forceinline__ void find_im2col_rows(Im2colRow* rows_s, const lab::Conv2dBackwardSizes& n,
                                                 int rc0) {
  static_assert(K * K < 31, "every tap has a bit below the one past the reduction");
  for (int rr = threadIdx.x; rr < TN; rr += kThreads) {
    const int r = rc0 + rr, ci = r / (K * K), ky = r % (K * K) / K, kx = r % K;
    const bool inside = r < n.c_in * K * K;
    rows_s[rr] = {inside ? ci * n.h_in * n.w_in + (ky - K / 2) * n.w_in + kx - K / 2 : 0,
                  inside ? ky * K + kx : 31};
  }
}

// The in-image taps of a reduction item whose tap (K/2, K/2) reads input pixel (iy0, ix0), bit ky * K + kx:
// the rows and columns in range, crossed (none when the item is not live). WgradStaging and
// conv2d_wgrad_narrow gather im2col values under it (Im2colRow::bit).
template <int K>
__device__ __forceinline__ unsigned in_image_taps(bool live, int iy0, int ix0, const lab::Conv2dBackwardSizes& n) {
  unsigned rows_in = 0, columns_in = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    rows_in |= unsigned(live && iy0 + k - K / 2 >= 0 && iy0 + k - K / 2 < n.h_in) << k;
    columns_in |= unsigned(ix0 + k - K / 2 >= 0 && ix0 + k - K / 2 < n.w_in) << k;
  }
  unsigned inside = 0;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) inside |= (rows_in >> ky & 1u ? columns_in : 0u) << (ky * K);
  return inside;
}

// The staging of conv2d_wgrad's GEMM (v2, v3, v4) at K 3 / 5, and at K 1 where WgradStaging1x1 does not
// apply: chunks of kChunk items q of the CTA's split, A = dz[q][co] (TM channels from co0) and B =
// im2col[q][r] (TN rows r = (ci, ky, kx), rows_s). A thread keeps one item row qq of every chunk (walked by
// ItemWalk) and the columns first, first + kColumnStep, ...; a warp covers 8 consecutive items x 4
// consecutive columns, so each dz load instruction reads 4 whole 32-byte sectors and each shared store (rows
// padded: Tile::kLdA, kLdB) hits 32 distinct banks.
template <int K, int TM, int TN, class Tile>
struct WgradStaging {
  static constexpr int kChunk = Tile::kChunk, kItemGroups = kChunk / 8, kColumnStep = kThreads / kChunk;
  static constexpr int kGrads = TM / kColumnStep, kInputs = TN / kColumnStep;
  static_assert(kThreads % kChunk == 0 && (kThreads / 32) % kItemGroups == 0 &&
                    (kThreads / 32 / kItemGroups) * 4 == kColumnStep && kGrads * kColumnStep == TM,
                "a warp stages 8 items x 4 columns; every column of each operand once per item");
  const lab::Conv2dWgradParams& params;
  const Im2colRow* rows_s;
  int qq, first, co0;
  long long q_end;
  ItemWalk<kChunk> item;
  float grads[kGrads], inputs[kInputs];

  __device__ __forceinline__ WgradStaging(const lab::Conv2dWgradParams& p, const Im2colRow* rows,
                                          long long q_begin, long long q_stop, int channel0)
      : params(p),
        rows_s(rows),
        qq((threadIdx.x / 32 % kItemGroups) * 8 + threadIdx.x % 8),
        first((threadIdx.x / 32 / kItemGroups) * 4 + threadIdx.x % 32 / 8),
        co0(channel0),
        q_end(q_stop),
        item(q_begin + qq, p.size.h_out, p.size.w_out) {}

  // This thread's item of the next chunk into registers (0 past the split or in the padding), then on.
  __device__ __forceinline__ void load() {
    const lab::Conv2dBackwardSizes& n = params.size;
    const int plane_out = n.h_out * n.w_out;
    const bool live = item.q < q_end;
    const float* dz = params.grad_z + ((long long)item.b * n.c_out) * plane_out + item.oy * n.w_out + item.ox;
    const int iy0 = item.oy * n.stride, ix0 = item.ox * n.stride;  // the input pixel of tap (K/2, K/2)
    const float* x = params.in + item.b * (long long)params.in_batch_stride + iy0 * n.w_in + ix0;
    const unsigned inside = in_image_taps<K>(live, iy0, ix0, n);
#pragma unroll
    for (int j = 0; j < kGrads; ++j) {
      const int co = co0 + first + j * kColumnStep;
      grads[j] = live && co < n.c_out ? dz[(long long)co * plane_out] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kInputs; ++j) {
      const Im2colRow row = rows_s[first + j * kColumnStep];
      inputs[j] = inside >> row.bit & 1u ? x[row.offset] : 0.0f;
    }
    item.advance(n.h_out, n.w_out);
  }

  __device__ __forceinline__ void store(typename Tile::Element* a, typename Tile::Element* b) const {
#pragma unroll
    for (int j = 0; j < kGrads; ++j) a[qq * Tile::kLdA + first + j * kColumnStep] = Tile::element(grads[j]);
#pragma unroll
    for (int j = 0; j < kInputs; ++j) b[qq * Tile::kLdB + first + j * kColumnStep] = Tile::element(inputs[j]);
  }
};

// kN consecutive floats from `from` (4 * kN-byte aligned) in one load.
template <int kN>
__device__ __forceinline__ void load_consecutive(float (&v)[kN], const float* from) {
  if constexpr (kN == 4) {
    const float4 f = *reinterpret_cast<const float4*>(from);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else if constexpr (kN == 2) {
    const float2 f = *reinterpret_cast<const float2*>(from);
    v[0] = f.x, v[1] = f.y;
  } else {
    static_assert(kN == 1, "1, 2 or 4 floats");
    v[0] = *from;
  }
}

// v as kN consecutive Tile::Elements of a tile row in one store: floats as they are, 16-bit values rounded in
// pairs (Tile::element_pair, the bits of two element() calls).
template <class Tile, int kN>
__device__ __forceinline__ void store_consecutive(typename Tile::Element* to, const float (&v)[kN]) {
  if constexpr (sizeof(typename Tile::Element) == 4) {
    if constexpr (kN == 4)
      *reinterpret_cast<float4*>(to) = make_float4(v[0], v[1], v[2], v[3]);
    else if constexpr (kN == 2)
      *reinterpret_cast<float2*>(to) = make_float2(v[0], v[1]);
    else
      to[0] = v[0];
  } else if constexpr (kN == 8) {
    *reinterpret_cast<uint4*>(to) =
        make_uint4(Tile::element_pair(v[0], v[1]), Tile::element_pair(v[2], v[3]),
                   Tile::element_pair(v[4], v[5]), Tile::element_pair(v[6], v[7]));
  } else if constexpr (kN == 4) {
    *reinterpret_cast<uint2*>(to) =
        make_uint2(Tile::element_pair(v[0], v[1]), Tile::element_pair(v[2], v[3]));
  } else if constexpr (kN == 2) {
    *reinterpret_cast<uint32_t*>(to) = Tile::element_pair(v[0], v[1]);
  } else {
    to[0] = Tile::element(v[0]);
  }
}

// One operand of WgradStaging1x1: kWidth columns (dz's channels or x's) x kChunk items a chunk, of which a
// thread holds kItems consecutive items (one float / float2 / float4 load a column) x kColumns consecutive
// columns (one store of up to 16 bytes an item). Consecutive lanes take the 8 / kItems vectors of one 8-item
// sector (32 bytes of a plane), then the next column block: each load instruction reads whole 32-byte sectors,
// and each store writes consecutive words of rows kItems apart, which the rows' padding (Tile::kLdA, kLdB)
// puts in distinct banks. A warp's sector, threadIdx.x / (2048 / kChunk), is the same for both operands.
template <int kWidth, int kChunk>
struct StagedColumns {
  static constexpr int kValues = kWidth * kChunk / kThreads, kItems = kValues < 4 ? kValues : 4,
                       kColumns = kValues / kItems, kVectorsPerSector = 8 / kItems;
  static_assert(kValues * kThreads == kWidth * kChunk && kItems * kColumns == kValues && 8 % kItems == 0 &&
                    kVectorsPerSector * (kWidth / kColumns) * (kChunk / 8) == kThreads,
                "every item of every column once: the threads of a sector cover its vectors x column blocks");
  int item, column;  // the thread's first item in its sector, and first column
  int pixel;         // the output pixel of its first item in the next chunk
  const float* at;   // that item's value in its first column
  float v[kColumns][kItems];

  __device__ __forceinline__ StagedColumns()
      : item(threadIdx.x % kVectorsPerSector * kItems),
        column(threadIdx.x / kVectorsPerSector % (kWidth / kColumns) * kColumns) {}

  // Points `at` the thread's first item of the first chunk, whose sector starts at output pixel `pixel0` of
  // image `image`; `first` is the operand's column `column` in image 0. A vector never crosses an image
  // (plane % 4 == 0), but the sectors of a plane of 4 (mod 8) may.
  __device__ __forceinline__ void start(const float* first, long long image_stride, int plane, int image,
                                        int pixel0) {
    pixel = pixel0 + item;
    if (pixel >= plane) pixel -= plane, ++image;
    at = first + image * image_stride + pixel;
  }

  // The thread's values of the chunk, one vector load a column (columns a plane apart, `columns` of them
  // real; zero past them, and for items past the `left` ones of the split from the sector); then on to the
  // next chunk, which may start images later (planes smaller than a chunk).
  __device__ __forceinline__ void load(long long image_stride, int plane, int columns, int left) {
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      if (item < left && j < columns) {
        load_consecutive(v[j], at + j * plane);
      } else {
#pragma unroll
        for (int i = 0; i < kItems; ++i) v[j][i] = 0.0f;
      }
    }
    at += kChunk, pixel += kChunk;
    for (; pixel >= plane; pixel -= plane) at += image_stride - plane;
  }

  // The values into the thread's rows (sector0 + item + i) of a k-major tile, one store an item.
  template <class Tile, int kLd>
  __device__ __forceinline__ void store(typename Tile::Element* tile, int sector0) const {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float row[kColumns];
#pragma unroll
      for (int j = 0; j < kColumns; ++j) row[j] = v[j][i];
      store_consecutive<Tile>(tile + (sector0 + item + i) * kLd + column, row);
    }
  }
};

// The staging of conv2d_wgrad's GEMM at K == 1 and stride 1 (v2, v3, v4), dW[co][ci] = sum_q dz[q][co]
// x[q][ci], where its planes keep 16-byte alignment (applies(): the plane a multiple of 4, the tensors and
// x's batch stride aligned; every plane of training at 640). An im2col row is then an input channel, every
// tap is inside, and consecutive items of an image are consecutive pixels of dz and x alike: no row table, no
// tap mask, and each column of a thread's items one float4 (float2, float) load (StagedColumns). The chunks
// and tiles are WgradStaging's, each tile element the same value rounded the same way, so the products and
// their order are too; only which thread stages which values differs. A thread's items of a chunk lie in one
// 8-item sector, whose image and pixel it advances a chunk at a time without a division. Other 1x1
// convolutions (planes whose vectors would cross images, stride 2, misaligned views) take WgradStaging.
// With sum_bias (the CTAs of the first column of tiles, when the launch has a bias gradient) each thread also
// adds up the dz values it loads, per column, and store_bias_sums() gives the CTA's db: kColumns more
// registers a thread where wgrad_bias_sums' CTAs would read dz a second time.
template <int TM, int TN, class Tile>
struct WgradStaging1x1 {
  static constexpr int kChunk = Tile::kChunk;
  using Grads = StagedColumns<TM, kChunk>;
  // Not float32 at TM 16: conv2d_wgrad_tiled<1, 16> spilled at its 64-register cap; its bias CTAs sum db.
  static constexpr bool kSumsBias = !(sizeof(typename Tile::Element) == 4 && TM == 16);
  const lab::Conv2dWgradParams& params;
  // The thread's columns inside c_out / c_in (fewer or none at the edge tiles), its sector's first row in a
  // chunk, and the items of the split from there.
  int grad_columns, input_columns, sector0, left;
  const bool sum_bias;
  float bias[Grads::kColumns] = {};
  Grads grads;
  StagedColumns<TN, kChunk> inputs;

  // Whether every vector of every chunk is aligned (4 * kItems bytes) and inside one image: the tensors and
  // x's batch stride 16-byte aligned, and every split and image starting at a multiple of 4 items.
  __device__ __forceinline__ static bool applies(const lab::Conv2dWgradParams& p) {
    return p.size.stride == 1 && p.size.h_out * p.size.w_out % 4 == 0 && p.split_items % 4 == 0 &&
           p.in_batch_stride % 4 == 0 && (unsigned long long)p.grad_z % 16 == 0 &&
           (unsigned long long)p.in % 16 == 0;
  }
  // Whether this staging sums the launch's bias gradient (in the first tile column's CTAs), so that its bias
  // CTAs have nothing to do.
  __device__ __forceinline__ static bool sums_bias(const lab::Conv2dWgradParams& p) {
    return kSumsBias && p.grad_bias && applies(p);
  }

  __device__ __forceinline__ WgradStaging1x1(const lab::Conv2dWgradParams& pr, long long q_begin,
                                             long long q_end, int co0, int ci0, bool sum_bias_)
      : params(pr), sector0(threadIdx.x / (2048 / kChunk) * 8), sum_bias(sum_bias_) {
    const lab::Conv2dBackwardSizes& n = pr.size;
    const int plane = n.h_out * n.w_out;
    grad_columns = n.c_out - co0 - grads.column;
    input_columns = n.c_in - ci0 - inputs.column;
    const long long q = q_begin + sector0;
    const int image = int(q / plane), pixel = int(q % plane);
    left = int(q_end - q);
    grads.start(pr.grad_z + (long long)(co0 + grads.column) * plane, (long long)n.c_out * plane, plane, image,
                pixel);
    inputs.start(pr.in + (long long)(ci0 + inputs.column) * plane, pr.in_batch_stride, plane, image, pixel);
  }

  // The thread's values of the next chunk into registers (0 past the split or in the padding), then on.
  __device__ __forceinline__ void load() {
    const lab::Conv2dBackwardSizes& n = params.size;
    const int plane = n.h_out * n.w_out;
    grads.load((long long)n.c_out * plane, plane, grad_columns, left);
    inputs.load(params.in_batch_stride, plane, input_columns, left);
    left -= kChunk;
    if (kSumsBias && sum_bias)
#pragma unroll
      for (int j = 0; j < Grads::kColumns; ++j)
#pragma unroll
        for (int i = 0; i < Grads::kItems; ++i) bias[j] += grads.v[j][i];
  }

  // The CTA's bias sums of channels co0 .. + TM - 1 into out[co]: each column's threads (kRounds x
  // kVectorsPerSector of them, the same column block) added in thread order. Every thread calls it.
  __device__ __forceinline__ void store_bias_sums(float* out, int co0) const {
    constexpr int kBlocks = TM / Grads::kColumns, kVectors = Grads::kVectorsPerSector,
                  kRounds = kThreads / (kVectors * kBlocks);
    static_assert(kRounds * kVectors * kBlocks == kThreads, "every thread in one column block");
    __shared__ float sums_s[kThreads][Grads::kColumns];
#pragma unroll
    for (int j = 0; j < Grads::kColumns; ++j) sums_s[threadIdx.x][j] = bias[j];
    __syncthreads();
    const int co = co0 + int(threadIdx.x);
    if (threadIdx.x >= TM || co >= params.size.c_out) return;
    const int block = threadIdx.x / Grads::kColumns, j = threadIdx.x % Grads::kColumns;
    float sum = 0.0f;
    for (int round = 0; round < kRounds; ++round)
      for (int vector = 0; vector < kVectors; ++vector)
        sum += sums_s[(round * kBlocks + block) * kVectors + vector][j];
    out[co] = sum;
  }

  __device__ __forceinline__ void store(typename Tile::Element* a, typename Tile::Element* b) const {
    grads.template store<Tile, Tile::kLdA>(a, sector0);
    inputs.template store<Tile, Tile::kLdB>(b, sector0);
  }
};

}  // namespace nn

__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_direct(const lab::Conv2dDgradParams params) {
  const lab::Conv2dBackwardSizes n = params.size;
  const int plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= plane_in) return;
  const int ci = blockIdx.y, b = blockIdx.z, k = n.kernel, stride = n.stride;
  const int in_per_group = n.c_in / n.groups, out_per_group = n.c_out / n.groups;
  const int group = ci / in_per_group, ci_in_group = ci % in_per_group;
  const int ty0 = p / n.w_in + k / 2, tx0 = p % n.w_in + k / 2;
  float acc = 0.0f;
  for (int j = 0; j < out_per_group; ++j) {
    const int co = group * out_per_group + j;
    const float* dz = params.grad_z + ((long long)b * n.c_out + co) * plane_out;
    const float* wk = params.w + ((long long)co * in_per_group + ci_in_group) * k * k;
    for (int ky = 0; ky < k; ++ky) {
      const int ty = ty0 - ky;
      if (ty < 0 || ty % stride != 0 || ty / stride >= n.h_out) continue;
      for (int kx = 0; kx < k; ++kx) {
        const int tx = tx0 - kx;
        if (tx < 0 || tx % stride != 0 || tx / stride >= n.w_out) continue;
        acc = fmaf(dz[(ty / stride) * n.w_out + tx / stride], wk[ky * k + kx], acc);
      }
    }
  }
  const long long at = (long long)ci * plane_in + p;
  float& out = params.grad_in[b * params.grad_in_batch_stride + at];
  if (params.gate)
    out = nn::silu_grad(acc, params.gate[b * params.gate_batch_stride + at]);
  else
    out = params.accumulate ? out + acc : acc;
}

namespace nn {

// The input-gradient GEMM of one CTA (v2, v3, v4): dx[ci0 .. + TM, class pixels px0 .. + TN] of image
// blockIdx.z / stride^2, stride-phase class blockIdx.z % stride^2 (DgradPhase).
template <int K, int TM, class Tile>
__device__ __forceinline__ void dgrad_gemm(const lab::Conv2dDgradParams& params) {
  const lab::Conv2dBackwardSizes n = params.size;
  constexpr int TN = 4096 / TM;
  const int classes = n.stride * n.stride;
  const int b = blockIdx.z / classes, ci0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const DgradPhase<K> phase(blockIdx.z % classes, n.stride, n.h_in, n.w_in);
  const int plane_in = n.h_in * n.w_in, class_pixels = phase.hc * phase.wc;
  if (px0 >= class_pixels) return;  // a smaller class than the grid's largest
  const float* dz_b = params.grad_z + (long long)b * n.c_out * n.h_out * n.w_out;
  DgradStaging<K, TM, TN, Tile> staging(params, phase, dz_b, ci0, px0);
  Tile tile;
  pipelined_products(tile, staging, staging.chunks());
  float* grad_in = params.grad_in + b * params.grad_in_batch_stride;
  const auto at = [&](int m, int p) {
    return ci0 + m < n.c_in && px0 + p < class_pixels
               ? grad_in + (long long)(ci0 + m) * plane_in + phase.pixel(px0 + p, n.w_in)
               : nullptr;
  };
  // Separate stores rather than one with a branch on `accumulate`: ptxas spilled that one in the 16-bit
  // module. With a gate, x's SiLU backward: its z has dx's per-image layout (dense planes).
  if (params.accumulate)
    tile.store([&](int m, int p, float v) {
      if (float* out = at(m, p)) *out += v;
    });
  else if (params.gate) {
    const float* gate = params.gate + b * params.gate_batch_stride;
    tile.store([&](int m, int p, float v) {
      if (float* out = at(m, p)) *out = nn::silu_grad(v, gate[out - grad_in]);
    });
  } else
    tile.store([&](int m, int p, float v) {
      if (float* out = at(m, p)) *out = v;
    });
}

}  // namespace nn

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_tiled(const lab::Conv2dDgradParams params) {
  nn::dgrad_gemm<K, TM, nn::FmaTile<TM, 4096 / TM>>(params);
}

template <int DT, int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_mma(const lab::Conv2dDgradParams params) {
  nn::dgrad_gemm<K, TM, nn::MmaTile<DT, TM, 4096 / TM>>(params);
}

__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_direct(const lab::Conv2dWgradParams params) {
  const lab::Conv2dBackwardSizes n = params.size;
  const int k = n.kernel, in_per_group = n.c_in / n.groups, out_per_group = n.c_out / n.groups;
  const long long e = blockIdx.x;  // the weight element (co, ci in group, ky, kx)
  const int co = int(e / (in_per_group * k * k)), rest = int(e % (in_per_group * k * k));
  const int ci = (co / out_per_group) * in_per_group + rest / (k * k), ky = rest % (k * k) / k, kx = rest % k;
  const int plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out;
  const long long items = (long long)n.batch * plane_out;
  float acc = 0.0f;
  for (nn::ItemWalk<nn::kThreads> item(threadIdx.x, n.h_out, n.w_out); item.q < items;
       item.advance(n.h_out, n.w_out)) {
    const int iy = item.oy * n.stride - k / 2 + ky, ix = item.ox * n.stride - k / 2 + kx;
    if (iy < 0 || iy >= n.h_in || ix < 0 || ix >= n.w_in) continue;
    acc = fmaf(
        params.grad_z[((long long)item.b * n.c_out + co) * plane_out + item.oy * n.w_out + item.ox],
        params.in[item.b * (long long)params.in_batch_stride + (long long)ci * plane_in + iy * n.w_in + ix],
        acc);
  }
  acc = nn::block_sum(acc);
  if (threadIdx.x == 0) params.grad_w[e] = acc;
}

namespace nn {

// Where a weight-gradient launch puts split `split`'s bias sums: grad_bias, or that split's row of
// bias_partial.
__device__ __forceinline__ float* bias_output(const lab::Conv2dWgradParams& params, int split) {
  return params.bias_partial ? params.bias_partial + (long long)split * params.size.c_out : params.grad_bias;
}

// The products of a 1x1 conv2d_wgrad CTA over items [q_begin, q_end), handed to store(tile): staged by
// WgradStaging1x1 where it applies, else by WgradStaging, through the same shared buffers. Each into a tile
// of its own: with one tile live across both loops, ptxas spilled in v2's at TM 16.
template <int TM, class Tile, class Store>
__device__ __forceinline__ void wgrad_products_1x1(const lab::Conv2dWgradParams& params, long long q_begin,
                                                   long long q_end, int co0, int rc0, const Store& store) {
  using Element = typename Tile::Element;
  constexpr int TN = 4096 / TM;
  __shared__ __align__(16) Element a_s[2][Tile::kChunk * Tile::kLdA];
  __shared__ __align__(16) Element b_s[2][Tile::kChunk * Tile::kLdB];
  const int chunks = int((q_end - q_begin + Tile::kChunk - 1) / Tile::kChunk);
  if (WgradStaging1x1<TM, TN, Tile>::applies(params)) {
    using Staging = WgradStaging1x1<TM, TN, Tile>;
    Staging staging(params, q_begin, q_end, co0, rc0, rc0 == 0 && Staging::sums_bias(params));
    Tile tile;
    pipelined_products(tile, staging, chunks, a_s, b_s);
    store(tile);
    if (staging.sum_bias) staging.store_bias_sums(bias_output(params, blockIdx.z), co0);
  } else {
    const lab::Conv2dBackwardSizes n = params.size;
    __shared__ Im2colRow rows_s[TN];
    find_im2col_rows<1, TN>(rows_s, n, rc0);
    __syncthreads();
    WgradStaging<1, TM, TN, Tile> staging(params, rows_s, q_begin, q_end, co0);
    Tile tile;
    pipelined_products(tile, staging, chunks, a_s, b_s);
    store(tile);
  }
}

// The bias gradient of channels co0 .. + channels - 1 over split `split`'s items [q_begin, q_end), in a
// weight-gradient launch's last column of CTAs (the GEMMs', conv2d_wgrad_narrow's): warp w sums channels co0
// + w, + 8, ..., its lanes striding over each image's run of the split's pixels, four loads in flight, then a
// butterfly (a fixed order); into grad_bias, or the split's row of bias_partial. The GEMM CTAs of the same
// channels and split, launched beside it, read the same dz: one pass over it from DRAM rather than
// conv2d_bias_grad's second (its launch cost 1.0 of 22.3 ms in a batch-32 fp16 iteration on the H100).
__device__ __forceinline__ void wgrad_bias_sums(const lab::Conv2dWgradParams& params, int co0, int channels,
                                                int split, long long q_begin, long long q_end) {
  constexpr int kLoads = 4;
  const lab::Conv2dBackwardSizes& n = params.size;
  const int plane = n.h_out * n.w_out, lane = threadIdx.x % 32;
  float* out = bias_output(params, split);
  for (int co = co0 + int(threadIdx.x / 32); co < min(co0 + channels, n.c_out); co += kThreads / 32) {
    float acc = 0.0f;
    for (long long q = q_begin; q < q_end;) {
      const int b = int(q / plane), p0 = int(q % plane);
      const int p1 = int(min((long long)plane, p0 + (q_end - q)));
      const float* dz = params.grad_z + ((long long)b * n.c_out + co) * plane;
      for (int p = p0 + lane; p < p1; p += 32 * kLoads) {
        float v[kLoads];
#pragma unroll
        for (int j = 0; j < kLoads; ++j) v[j] = p + 32 * j < p1 ? dz[p + 32 * j] : 0.0f;
#pragma unroll
        for (int j = 0; j < kLoads; ++j) acc += v[j];
      }
      q += p1 - p0;
    }
    acc = lab_warp_sum(acc);
    if (lane == 0) out[co] = acc;
  }
}

// The weight-gradient GEMM of one CTA (v2, v3, v4): dW[co0 .. + TM, rc0 .. + TN] over split blockIdx.z's
// items, into grad_w or the split's partial; with grad_bias, the last column of CTAs sums db instead.
template <int K, int TM, class Tile>
__device__ __forceinline__ void wgrad_gemm(const lab::Conv2dWgradParams& params) {
  const lab::Conv2dBackwardSizes n = params.size;
  constexpr int TN = 4096 / TM;
  const int co0 = blockIdx.y * TM, rc0 = blockIdx.x * TN, split = blockIdx.z, rows = n.c_in * K * K;
  const long long items = (long long)n.batch * n.h_out * n.w_out,
                  q_begin = (long long)split * params.split_items;
  const long long q_end = min(items, q_begin + params.split_items);
  if (params.grad_bias && blockIdx.x == gridDim.x - 1) {
    if (K != 1 || !WgradStaging1x1<TM, TN, Tile>::sums_bias(params))
      wgrad_bias_sums(params, co0, TM, split, q_begin, q_end);
    return;
  }
  const auto store_results = [&](const Tile& tile) {
    float* out = params.partial ? params.partial + (long long)split * n.c_out * rows : params.grad_w;
    tile.store([&](int m, int r, float v) {
      if (co0 + m < n.c_out && rc0 + r < rows) out[(long long)(co0 + m) * rows + rc0 + r] = v;
    });
  };
  if constexpr (K == 1) {
    wgrad_products_1x1<TM, Tile>(params, q_begin, q_end, co0, rc0, store_results);
  } else {
    __shared__ Im2colRow rows_s[TN];
    find_im2col_rows<K, TN>(rows_s, n, rc0);
    __syncthreads();
    WgradStaging<K, TM, TN, Tile> staging(params, rows_s, q_begin, q_end, co0);
    Tile tile;
    pipelined_products(tile, staging, int((q_end - q_begin + Tile::kChunk - 1) / Tile::kChunk));
    store_results(tile);
  }
}

}  // namespace nn

namespace nn {
// CTAs per SM the registers of the weight-gradient GEMMs must allow (none spills): the staging's tap masks
// (WgradStaging) left to ptxas took conv2d_wgrad_tiled<3, 32> from 54 to 66 registers (4 -> 3 CTAs) and
// conv2d_wgrad_mma<.., 32> from 73 to 95 (3 -> 2); the mma ones at TM 16 spill below 2 CTAs' budget.
__host__ __device__ constexpr int wgrad_ctas_per_sm(bool mma, int tm) {
  return !mma ? 4 : tm == 64 ? 4 : tm == 32 ? 3 : 2;
}
}  // namespace nn

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads, nn::wgrad_ctas_per_sm(false, TM))
    conv2d_wgrad_tiled(const lab::Conv2dWgradParams params) {
  nn::wgrad_gemm<K, TM, nn::FmaTile<TM, 4096 / TM>>(params);
}

template <int DT, int K, int TM>
__global__ void __launch_bounds__(nn::kThreads, nn::wgrad_ctas_per_sm(true, TM))
    conv2d_wgrad_mma(const lab::Conv2dWgradParams params) {
  nn::wgrad_gemm<K, TM, nn::MmaTile<DT, TM, 4096 / TM>>(params);
}

namespace nn {

// The reduction items of one k16 step of conv2d_wgrad_narrow's warp that this lane's fragments hold: items
// 2t, 2t + 1, 2t + 8, 2t + 9 of the step (the k columns of the A and B fragments, lab_mma.cuh), as two walks
// (2t and 2t + 8) whose odd neighbours are found without a division. The warps of the CTA take the split's
// steps in turn, so a walk advances 8 steps (128 items) at a time.
struct NarrowItems {
  static constexpr int kStride = 16 * (kThreads / 32);
  ItemWalk<kStride> even[2];

  __device__ __forceinline__ NarrowItems(long long q_step0, int lane, int h_out, int w_out)
      : even{ItemWalk<kStride>(q_step0 + 2 * (lane % 4), h_out, w_out),
             ItemWalk<kStride>(q_step0 + 2 * (lane % 4) + 8, h_out, w_out)} {}

  // Item i (0..3: 2t, 2t + 1, 2t + 8, 2t + 9) as (q, image, output row, output column).
  __device__ __forceinline__ void item(int i, int h_out, int w_out, long long& q, int& b, int& oy,
                                       int& ox) const {
    const ItemWalk<kStride>& w = even[i / 2];
    q = w.q + i % 2, b = w.b, oy = w.oy, ox = w.ox;
    if (i % 2 == 0) return;
    if (++ox == w_out) {
      ox = 0;
      if (++oy == h_out) oy = 0, ++b;
    }
  }
  __device__ __forceinline__ void advance(int h_out, int w_out) {
    even[0].advance(h_out, w_out);
    even[1].advance(h_out, w_out);
  }
};

}  // namespace nn

// conv2d_wgrad_narrow<DT, K, NT> (v3_fp16 / v4_bf16 where the weight gradient is narrow: groups 1, C_OUT <=
// 16 and R = C_IN * K*K <= 8 NT rows, e.g. the 3 -> 16 stem, R 27): dW[co][r] = sum_q dz[q][co] im2col[q][r]
// with each warp streaming its own k16 steps of the split's items straight from global memory into mma.sync
// fragments: no shared staging, no barrier in the loop, and no tile columns past R (the TM 16 x TN 256 tile
// of conv2d_wgrad_mma computed 256 columns for the stem's 27, 851 us of a batch-32 iteration on the H200).
// A warp holds the whole 16 x 8 NT result (NT n8 tiles: 4 NT floats a lane); the lane's k columns are items
// (NarrowItems), its A rows channels g and g + 8, its B columns rows g + 8 j (im2col offsets and tap bits in
// shared memory, Im2colRow). The warps' results are then added in warp order through shared memory
// (deterministic) and stored into grad_w or split blockIdx.z's partial, as conv2d_wgrad_mma's.
template <int DT, int K, int NT>
__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_narrow(const lab::Conv2dWgradParams params) {
  using nn::Im2colRow;
  constexpr int kRows = 8 * NT, kWarps = nn::kThreads / 32;
  const lab::Conv2dBackwardSizes n = params.size;
  const int rows = n.c_in * K * K, plane_out = n.h_out * n.w_out, warp = threadIdx.x / 32,
            lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long items = (long long)n.batch * plane_out, q_begin = (long long)blockIdx.z * params.split_items;
  const long long q_end = min(items, q_begin + params.split_items);
  if (params.grad_bias && blockIdx.x == gridDim.x - 1) {  // the bias CTA of this split
    nn::wgrad_bias_sums(params, 0, 16, blockIdx.z, q_begin, q_end);
    return;
  }
  __shared__ Im2colRow rows_s[kRows];
  nn::find_im2col_rows<K, kRows>(rows_s, n, 0);
  __syncthreads();
  float d[NT][4] = {};
  nn::NarrowItems walk(q_begin + 16 * warp, lane, n.h_out, n.w_out);
  // Two steps' loads in flight where the registers allow (H200, batch 32 at 640: the stem's NT 4 238 -> 195
  // us, NT 9 154 -> 92; NT 18 57-60 -> 62 us, so it keeps one).
#pragma unroll(NT <= 9 ? 2 : 1)
  for (long long q0 = q_begin + 16 * warp; q0 < q_end; q0 += nn::NarrowItems::kStride) {
    float dz[2][4];           // [channel g, g + 8][item]
    const float* x_q[4];      // [item]: its input pixel of tap (K/2, K/2)
    unsigned inside[4];       // [item]: its in-image taps, bit ky * K + kx (none past the split)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      long long q;
      int b, oy, ox;
      walk.item(i, n.h_out, n.w_out, q, b, oy, ox);
      const bool live = q < q_end;
      const float* dz_q = params.grad_z + (long long)b * n.c_out * plane_out + oy * n.w_out + ox;
#pragma unroll
      for (int h = 0; h < 2; ++h) dz[h][i] = live && g + 8 * h < n.c_out ? dz_q[(g + 8 * h) * plane_out] : 0.0f;
      const int iy0 = oy * n.stride, ix0 = ox * n.stride;
      inside[i] = nn::in_image_taps<K>(live, iy0, ix0, n);
      x_q[i] = params.in + b * (long long)params.in_batch_stride + iy0 * n.w_in + ix0;
    }
    const uint32_t a[4] = {lab_pack2<DT>(dz[0][0], dz[0][1]), lab_pack2<DT>(dz[1][0], dz[1][1]),
                           lab_pack2<DT>(dz[0][2], dz[0][3]), lab_pack2<DT>(dz[1][2], dz[1][3])};
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const Im2colRow row = rows_s[g + 8 * j];
      float x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) x[i] = inside[i] >> row.bit & 1u ? x_q[i][row.offset] : 0.0f;
      const uint32_t bf[2] = {lab_pack2<DT>(x[0], x[1]), lab_pack2<DT>(x[2], x[3])};
      lab_mma_16816<DT>(d[j], a, bf);
    }
    walk.advance(n.h_out, n.w_out);
  }
  // The warps' 16 x kRows results added in warp order.
  __shared__ float sum_s[16][kRows];
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float& s = sum_s[g + 8 * (e / 2)][8 * j + 2 * t + e % 2];
          s = w == 0 ? d[j][e] : s + d[j][e];
        }
    __syncthreads();
  }
  float* out = params.partial ? params.partial + (long long)blockIdx.z * n.c_out * rows : params.grad_w;
  for (int e = threadIdx.x; e < 16 * kRows; e += nn::kThreads) {
    const int co = e / kRows, r = e % kRows;
    if (co < n.c_out && r < rows) out[(long long)co * rows + r] = sum_s[co][r];
  }
}

template <int K>
__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_depthwise(const lab::Conv2dWgradParams params) {
  const lab::Conv2dBackwardSizes n = params.size;
  const int c = blockIdx.x, split = blockIdx.y, plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out;
  const long long items = (long long)n.batch * plane_out, q_begin = (long long)split * params.split_items;
  const long long q_end = min(items, q_begin + params.split_items);
  float acc[K * K + 1] = {};  // the taps' sums, then dz's (db)
  for (nn::ItemWalk<nn::kThreads> item(q_begin + threadIdx.x, n.h_out, n.w_out); item.q < q_end;
       item.advance(n.h_out, n.w_out)) {
    // Channel c of image b (C_in == C_out).
    const float g =
        params.grad_z[((long long)item.b * n.c_out + c) * plane_out + item.oy * n.w_out + item.ox];
    acc[K * K] += g;
    const float* x = params.in + item.b * (long long)params.in_batch_stride + (long long)c * plane_in;
    const int iy0 = item.oy * n.stride - K / 2, ix0 = item.ox * n.stride - K / 2;
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const int iy = iy0 + ky;
      if (iy < 0 || iy >= n.h_in) continue;
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        const int ix = ix0 + kx;
        if (ix >= 0 && ix < n.w_in) acc[ky * K + kx] = fmaf(g, x[iy * n.w_in + ix], acc[ky * K + kx]);
      }
    }
  }
  // Each tap's sum over the CTA: butterfly within each warp (lane 0's result), then the warps in order.
  constexpr int kSums = K * K + 1;
  __shared__ float warp_sums[nn::kThreads / 32][kSums];
#pragma unroll
  for (int t = 0; t < kSums; ++t) {
    const float sum = lab_warp_sum(acc[t]);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32][t] = sum;
  }
  __syncthreads();
  if (threadIdx.x >= kSums) return;
  float sum = 0.0f;
  for (int w = 0; w < nn::kThreads / 32; ++w) sum += warp_sums[w][threadIdx.x];
  if (threadIdx.x < K * K) {
    float* out = params.partial ? params.partial + (long long)split * n.c_out * K * K : params.grad_w;
    out[c * K * K + threadIdx.x] = sum;
  } else if (params.grad_bias) {
    nn::bias_output(params, split)[c] = sum;
  }
}

namespace nn {
// Element i of `splits` partial arrays `stride` floats apart, added in split order.
__device__ __forceinline__ float sum_of_splits(const float* partial, long long stride, int splits,
                                               long long i) {
  float sum = 0.0f;
  for (int s = 0; s < splits; ++s) sum += partial[s * stride + i];
  return sum;
}
}  // namespace nn

__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_reduce(const lab::Conv2dWgradReduceParams params) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params.count)
    params.grad_w[i] = nn::sum_of_splits(params.partial, params.count, params.splits, i);
  else if (params.grad_bias && i < params.count + params.c_out)
    params.grad_bias[i - params.count] =
        nn::sum_of_splits(params.bias_partial, params.c_out, params.splits, i - params.count);
}

namespace nn {

// The bias gradient's sum of CTA (channel blockIdx.x, image group blockIdx.y), `acc` per thread, in the fixed
// tree order of block_sum: into grad_bias[c] when partial is null (one group), else into partial[g, c], and
// the channel's last CTA to arrive adds the groups' sums in group order into grad_bias[c] (the order the
// split reduction kernel used, without its launch: one a conv, ~105 of a yolo26n iteration). The classic
// fence pattern: each CTA's partial is visible device-wide before its arrival counts, and the last one fences
// again before reading them; it resets the count for the next launch.
__device__ __forceinline__ void store_channel_sum(float acc, int c_out, float* grad_bias, float* partial,
                                                  unsigned* arrivals) {
  acc = block_sum(acc);
  if (threadIdx.x != 0) return;
  const int c = blockIdx.x;
  if (!partial) {
    grad_bias[c] = acc;
    return;
  }
  partial[(long long)blockIdx.y * c_out + c] = acc;
  __threadfence();
  if (atomicAdd(arrivals + c, 1u) != gridDim.y - 1) return;
  __threadfence();
  const volatile float* sums = partial;
  float sum = 0.0f;
  for (unsigned b = 0; b < gridDim.y; ++b) sum += sums[(long long)b * c_out + c];
  grad_bias[c] = sum;
  arrivals[c] = 0;
}

// CTA (channel blockIdx.x, image group blockIdx.y)'s items of a bias sum: the channel's planes of the group's
// images one after another (the last group may hold fewer images), item q at image first + q / plane,
// pixel q % plane.
struct ChannelGroupItem {
  int image, pixel;
};
struct ChannelGroup {
  int first, items, plane;
  __device__ ChannelGroup(int batch, int images, int plane_)
      : first(int(blockIdx.y) * images), items(min(images, batch - first) * plane_), plane(plane_) {}
  __device__ __forceinline__ ChannelGroupItem at(int q) const {
    const int i = q / plane;
    return {first + i, q - i * plane};
  }
  // Where `item` of channel blockIdx.x lies in a dense [B, c_out, plane] tensor.
  __device__ __forceinline__ long long dense(ChannelGroupItem item, int c_out) const {
    return ((long long)item.image * c_out + blockIdx.x) * plane + item.pixel;
  }
};

// Where the plane is a multiple of 4 the bias sums take a group's items four at a time, quad q = items 4q ..
// 4q + 3 of one image (a quad never straddles two), as one 16-byte access: thread t's quads t, t + 256, ...,
// each added in pixel order. Both kernels follow this order, so their sums of the same dz agree bit for bit.
__device__ __forceinline__ bool in_quads(int plane) {
  return plane % 4 == 0;
}
__device__ __forceinline__ void add_quad(float& acc, float4 d) {
  acc += d.x;
  acc += d.y;
  acc += d.z;
  acc += d.w;
}

}  // namespace nn

__global__ void __launch_bounds__(nn::kThreads) conv2d_bias_grad(const lab::Conv2dBiasGradParams params) {
  const nn::ChannelGroup group(params.batch, params.images, params.plane);
  float acc = 0.0f;
  if (nn::in_quads(params.plane)) {
    for (int q = threadIdx.x; q < group.items / 4; q += nn::kThreads)
      nn::add_quad(
          acc, *reinterpret_cast<const float4*>(params.grad_z + group.dense(group.at(4 * q), params.c_out)));
  } else {
    for (int q = threadIdx.x; q < group.items; q += nn::kThreads)
      acc += params.grad_z[group.dense(group.at(q), params.c_out)];
  }
  nn::store_channel_sum(acc, params.c_out, params.grad_bias, params.partial, params.arrivals);
}

// A thread's items q = threadIdx.x, + 256, ... of its group (its quads, in_quads) are read kLoads at a time
// (each group's loads issued before its first store, which could alias them) and summed in that order: the
// sums conv2d_bias_grad finds from dz.
__global__ void __launch_bounds__(nn::kThreads)
    conv2d_silu_bias_backward(const lab::Conv2dSiluBiasBackwardParams params) {
  constexpr int kLoads = 4;
  const nn::ChannelGroup group(params.batch, params.images, params.plane);
  const long long channel = (long long)blockIdx.x * params.plane;
  float acc = 0.0f;
  if (nn::in_quads(params.plane)) {
    // dy as 16-byte loads where its view is 16-byte aligned (a channel slice of a wider gradient may not be).
    const bool vector_dy = ((reinterpret_cast<unsigned long long>(params.grad_out) |
                             (unsigned long long)params.grad_out_batch_stride * 4) &
                            15) == 0;
    const int quads = group.items / 4;
    for (int q0 = threadIdx.x; q0 < quads; q0 += kLoads * nn::kThreads) {
      float4 g[kLoads], z[kLoads];
      long long at[kLoads];  // of z and dz
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        const int q = q0 + j * nn::kThreads;
        g[j] = z[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f), at[j] = 0;
        if (q >= quads) continue;
        const nn::ChannelGroupItem item = group.at(4 * q);
        at[j] = group.dense(item, params.c_out);
        const float* dy = params.grad_out + item.image * params.grad_out_batch_stride + channel + item.pixel;
        g[j] = vector_dy ? *reinterpret_cast<const float4*>(dy) : make_float4(dy[0], dy[1], dy[2], dy[3]);
        z[j] = *reinterpret_cast<const float4*>(params.z + at[j]);
      }
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (q0 + j * nn::kThreads >= quads) break;
        const float4 d = make_float4(nn::silu_grad(g[j].x, z[j].x), nn::silu_grad(g[j].y, z[j].y),
                                     nn::silu_grad(g[j].z, z[j].z), nn::silu_grad(g[j].w, z[j].w));
        *reinterpret_cast<float4*>(params.grad_z + at[j]) = d;
        nn::add_quad(acc, d);
      }
    }
    nn::store_channel_sum(acc, params.c_out, params.grad_bias, params.partial, params.arrivals);
    return;
  }
  for (int q0 = threadIdx.x; q0 < group.items; q0 += kLoads * nn::kThreads) {
    float g[kLoads], z[kLoads];
    long long at[kLoads];  // of z and dz
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int q = q0 + j * nn::kThreads;
      g[j] = z[j] = 0.0f, at[j] = 0;
      if (q >= group.items) continue;
      const nn::ChannelGroupItem item = group.at(q);
      at[j] = group.dense(item, params.c_out);
      g[j] = params.grad_out[item.image * params.grad_out_batch_stride + channel + item.pixel];
      z[j] = params.z[at[j]];
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if (q0 + j * nn::kThreads >= group.items) break;
      const float d = nn::silu_grad(g[j], z[j]);
      params.grad_z[at[j]] = d;
      acc += d;
    }
  }
  nn::store_channel_sum(acc, params.c_out, params.grad_bias, params.partial, params.arrivals);
}

// The stride-2 input gradient from a shared dz patch (v6_fp16_patch / v7_bf16_patch) shares the 16-bit module.
#include "nn/conv2d_dgrad_patch.cu"

#endif  // LAB_NN_CONV2D_BACKWARD_CU
