// conv2d_mma: the dense (groups == 1) Conv2d of conv2d.cu on fp16 / bf16 tensor cores — variants v5_fp16
// (DT = LAB_F16) and v6_bf16 (LAB_BF16). Same operation, layouts, epilogue (bias, SiLU, residual, the
// optional pre-activation output pre) and split-K partials as conv2d_tiled (reduced by conv2d_splitk_reduce
// of conv2d.cu); activations stay float32 in memory: the im2col values are rounded to DT as they are staged,
// the weights once on the host, and the products are mma.sync m16n8k16 with float accumulation.
//
// conv2d_mma<DT, K, TM>: implicit GEMM out[co][p] = sum_r W[co][r] X[r][p] over r = (ci, ky, kx).
//   A CTA of 8 warps computes TM output channels x TN = 4096 / TM pixels (flattened y * Wo + x); each warp
//   owns 16 channels x 32 pixels (four n8 tiles). The reduction runs in chunks of 32 rows, double buffered in
//   shared memory, one __syncthreads per chunk:
//   - weights wh [C_out][red_pad] (DT patterns, each row zero-padded to red_pad, a multiple of 32) go global
//     -> shared with cp.async in 16-byte pieces, tile w_s[TM][32 + 8] (the A operand, row-major);
//   - the im2col chunk is read into registers one chunk ahead (each thread: one pixel and TN / 8 consecutive
//     rows; a warp's loads of one row are consecutive pixels), rounded to DT and stored as x_s[TN][32 + 8]
//     (pixel rows, reduction columns: the B operand n-major) once the current chunk's products are issued.
//     The rows' (channel, tap) are decomposed once per CTA into a 32-entry shared table two chunks ahead
//     (Im2colTap: an int32 offset, so c_in * in_cs stays below 2^31), and each thread finds its pixel's
//     in-image taps once as a bit mask: a staged value is a table broadcast, a bit test and a load, where
//     the divisions and bounds checks per value had made the 3x3 convs with 16 output channels issue-bound
//     (ncu on the H200: 52 % SM throughput, 3 % DRAM, at 64 -> 16 channels, 80 x 80, batch 32).
//   Rows are padded by 8 elements so the eight 16-byte rows of each ldmatrix fall in distinct banks. The
//   accumulators go straight to the epilogue (each lane holds two adjacent pixels of two channels per n8
//   tile: each channel's rows found once, a pixel pair one 8-byte access per plane where the views keep pairs
//   aligned, SiLU as nn::act_fast: the hardware's exp2 and reciprocal). Grid (ceil(Ho*Wo / TN),
//   ceil(C_out / TM), B * splits) as conv2d_tiled; split_rows is a multiple of 32 so a chunk never straddles
//   two splits. Needs sm_80 or newer; the cpu emulator runs it through its mma / ldmatrix / cp.async model.
//   Expect rel L2 ~2e-4 (fp16) / ~2e-3 (bf16) against float64.
#ifndef LAB_NN_CONV2D_MMA_CU
#define LAB_NN_CONV2D_MMA_CU
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/nn_common.cuh"

namespace nn {

constexpr int kMmaChunk = 32;          // reduction rows per shared-memory step
constexpr int kMmaLd = kMmaChunk + 8;  // row stride of the staged tiles, in elements

// One reduction row r = (ci, ky, kx) of a staged chunk, decomposed once for the whole CTA (find_chunk_taps):
// its input's offset from a pixel's window corner, ci * in_cs + ky * w_in + kx, and its tap's bit ky * K + kx
// in a pixel's tap mask (kNoTap, never set, for rows past the reduction's end).
struct Im2colTap {
  int offset, bit;
};
constexpr int kNoTap = 31;

// taps_s[i] = the tap of row r0 + i, i < kMmaChunk (one thread a row).
template <int K>
__device__ __forceinline__ void find_chunk_taps(Im2colTap* taps_s, int r0, int r_end, long long in_cs,
                                                int w_in) {
  const int i = threadIdx.x;
  if (i >= kMmaChunk) return;
  const int r = r0 + i, ci = r / (K * K), kk = r % (K * K);
  taps_s[i] = r < r_end ? Im2colTap{int(ci * in_cs) + kk / K * w_in + kk % K, kk} : Im2colTap{0, kNoTap};
}

// The im2col values one thread stages per chunk: rows row0 .. row0 + ROWS - 1 of the chunk, one pixel. The
// pixel's bounds are found once (`inside`: the bit of each tap within the image), so a staged value costs a
// shared-memory broadcast of its row's tap, a bit test and a load.
template <int K, int ROWS>
struct Im2colRun {
  static_assert(K * K < kNoTap, "every tap has a bit below kNoTap's");
  const float* corner;  // the pixel's window origin in its image (before the plane's start in the padding)
  int row0;
  unsigned inside;  // bit ky * K + kx: that tap lies in the image (none for a pixel past the plane)
  float v[ROWS];

  __device__ __forceinline__ Im2colRun(const float* in_b, int px, int plane_out, int w_out, int stride,
                                       int first_row, int h_in, int w_in) {
    row0 = first_row;
    const bool valid = px < plane_out;
    const int iy0 = (valid ? px / w_out : 0) * stride - K / 2, ix0 = (valid ? px % w_out : 0) * stride - K / 2;
    corner = in_b + (iy0 * w_in + ix0);
    inside = 0;
#pragma unroll
    for (int ky = 0; ky < K; ++ky)
#pragma unroll
      for (int kx = 0; kx < K; ++kx)
        if (valid && iy0 + ky >= 0 && iy0 + ky < h_in && ix0 + kx >= 0 && ix0 + kx < w_in)
          inside |= 1u << (ky * K + kx);
  }

  // v[i] = im2col[row row0 + i of the chunk whose taps are taps_s, pixel], 0 in the padding.
  __device__ __forceinline__ void load(const Im2colTap* taps_s) {
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const Im2colTap t = taps_s[row0 + i];
      v[i] = inside >> t.bit & 1u ? __ldg(corner + t.offset) : 0.0f;
    }
  }

  // The loaded values rounded to DT into row `col` of x_s (stride kMmaLd), columns row0.., 16 bytes a store.
  template <int DT>
  __device__ __forceinline__ void store(uint16_t* x_s, int col) const {
    static_assert(ROWS % 8 == 0, "whole 16-byte pieces");
#pragma unroll
    for (int i = 0; i < ROWS; i += 8) {
      uint4 piece;
      piece.x = lab_pack2<DT>(v[i], v[i + 1]);
      piece.y = lab_pack2<DT>(v[i + 2], v[i + 3]);
      piece.z = lab_pack2<DT>(v[i + 4], v[i + 5]);
      piece.w = lab_pack2<DT>(v[i + 6], v[i + 7]);
      *reinterpret_cast<uint4*>(x_s + col * kMmaLd + row0 + i) = piece;
    }
  }
};

// cp.async of the weight chunk at reduction row r0 (TM channels from co0, kMmaChunk columns) into w_s;
// channels past c_out are zero-filled.
template <int TM>
__device__ __forceinline__ void stage_weights_async(uint16_t* w_s, const uint16_t* __restrict__ wh,
                                                    int red_pad, int r0, int co0, int c_out) {
  constexpr int kPieces = kMmaChunk / 8;  // 16-byte pieces per channel row
#pragma unroll
  for (int i = threadIdx.x; i < TM * kPieces; i += kThreads) {
    const int row = i / kPieces, col = (i % kPieces) * 8, co = co0 + row;
    const bool valid = co < c_out;
    lab_cp_async_16(w_s + row * kMmaLd + col, wh + (long long)(valid ? co : 0) * red_pad + r0 + col, valid);
  }
  lab_cp_async_commit();
}

// CTAs per SM the register budget of conv2d_mma<.., TM> must allow: 4 / 3 / 2 for TM 64 / 32 / 16 (at most
// 64 / 80 / 128 registers, none spills). Left to itself ptxas gave TM 64 up to 70 registers (3 CTAs) and
// spilled some TM 32 instances at 64; asking two CTAs of every tile (up to 128 registers) made the network's
// batch-32 forward ~10 % slower.
__host__ __device__ constexpr int mma_ctas_per_sm(int tm) {
  return tm == 64 ? 4 : tm == 32 ? 3 : 2;
}

}  // namespace nn

template <int DT, int K, int TM>
__global__ void __launch_bounds__(nn::kThreads, nn::mma_ctas_per_sm(TM))
    conv2d_mma(const float* __restrict__ in, long long in_bs, long long in_cs,
               const uint16_t* __restrict__ wh, int red_pad, const float* __restrict__ bias,
               const float* residual, long long res_bs, long long res_cs, float* out, long long out_bs,
               long long out_cs, float* pre, long long pre_bs, long long pre_cs, int c_in, int c_out,
               int h_in, int w_in, int h_out, int w_out, int stride, int silu, int batch, int split_rows,
               float* partial) {
  constexpr int kChunk = nn::kMmaChunk, LD = nn::kMmaLd, TN = 4096 / TM;
  constexpr int kWarpCols = 8 / (TM / 16);                    // warps along pixels
  constexpr int kRowsPerThread = kChunk * TN / nn::kThreads;  // im2col rows a thread stages per chunk
  static_assert(TN / kWarpCols == 32, "each warp owns 16 channels x 32 pixels");
  __shared__ __align__(16) uint16_t w_s[2][TM * LD];
  __shared__ __align__(16) uint16_t x_s[2][TN * LD];
  __shared__ nn::Im2colTap taps_s[2][kChunk];  // chunk c's rows in taps_s[c % 2]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / kWarpCols, wn = warp % kWarpCols;
  const int b = blockIdx.z % batch, split = blockIdx.z / batch;
  const int co0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const int plane_out = h_out * w_out, reduction = c_in * K * K;
  const int r_begin = split * split_rows, r_end = min(reduction, r_begin + split_rows);
  const int chunks = (r_end - r_begin + kChunk - 1) / kChunk;
  const float* in_b = in + b * in_bs;
  const int col = tid % TN;
  nn::Im2colRun<K, kRowsPerThread> column(in_b, px0 + col, plane_out, w_out, stride, tid / TN * kRowsPerThread,
                                          h_in, w_in);

  nn::stage_weights_async<TM>(w_s[0], wh, red_pad, r_begin, co0, c_out);
  nn::find_chunk_taps<K>(taps_s[0], r_begin, r_end, in_cs, w_in);
  if (chunks > 1) nn::find_chunk_taps<K>(taps_s[1], r_begin + kChunk, r_end, in_cs, w_in);
  __syncthreads();
  column.load(taps_s[0]);
  column.template store<DT>(x_s[0], col);
  lab_cp_async_wait<0>();
  __syncthreads();

  float acc[4][4] = {};
  for (int c = 0; c < chunks; ++c) {
    const int buf = c % 2;
    const bool more = c + 1 < chunks;
    if (more) {
      const int r_next = r_begin + (c + 1) * kChunk;
      nn::stage_weights_async<TM>(w_s[buf ^ 1], wh, red_pad, r_next, co0, c_out);
      column.load(taps_s[buf ^ 1]);
    }
#pragma unroll
    for (int kc = 0; kc < kChunk / 16; ++kc) {
      uint32_t a[4];
      lab_load_a<LD>(a, w_s[buf], wm * 16, kc * 16, lane);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bf[4];
        lab_load_b_rows_n<LD>(bf, x_s[buf], wn * 32 + np * 16, kc * 16, lane);
        lab_mma_16816_pair<DT>(acc[2 * np], acc[2 * np + 1], a, bf);
      }
    }
    if (more) column.template store<DT>(x_s[buf ^ 1], col);
    // Chunk c + 2's taps into the table chunk c's loads left (read in the previous step, before its barrier).
    if (c + 2 < chunks) nn::find_chunk_taps<K>(taps_s[buf], r_begin + (c + 2) * kChunk, r_end, in_cs, w_in);
    lab_cp_async_wait<0>();
    __syncthreads();
  }

  // Each lane holds pixels 2t, 2t + 1 of four n8 tiles for two channels: the channels' rows are found once,
  // and a pixel pair goes out as one 8-byte access per plane where every view keeps pairs aligned.
  const int g = lane / 4, t = lane % 4;
  const bool pairs = ((plane_out | out_bs | out_cs | pre_bs | pre_cs | res_bs | res_cs) & 1) == 0 &&
                     ((reinterpret_cast<unsigned long long>(out) | reinterpret_cast<unsigned long long>(pre) |
                       reinterpret_cast<unsigned long long>(residual) | reinterpret_cast<unsigned long long>(partial)) & 7) == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int co = co0 + wm * 16 + g + 8 * half;
    if (co >= c_out) continue;
    // Split-K: the raw sums into the split's partial plane (no bias, activation or residual).
    const float bias_co = partial ? 0.0f : bias[co];
    const int act_silu = partial ? 0 : silu;
    float* out_row = partial ? partial + ((long long)(split * batch + b) * c_out + co) * plane_out
                             : out + b * out_bs + co * out_cs;
    float* pre_row = pre && !partial ? pre + b * pre_bs + co * pre_cs : nullptr;
    const float* res_row = residual && !partial ? residual + b * res_bs + co * res_cs : nullptr;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int p = px0 + wn * 32 + nt * 8 + 2 * t;
      const float v0 = acc[nt][2 * half], v1 = acc[nt][2 * half + 1];
      if (pairs && p + 1 < plane_out) {
        nn::store_output_pair<true>(v0, v1, bias_co, act_silu, res_row, pre_row, out_row, p);
      } else {
        if (p < plane_out) nn::store_output_at<true>(v0, bias_co, act_silu, res_row, pre_row, out_row, p);
        if (p + 1 < plane_out)
          nn::store_output_at<true>(v1, bias_co, act_silu, res_row, pre_row, out_row, p + 1);
      }
    }
  }
}

#endif  // LAB_NN_CONV2D_MMA_CU
