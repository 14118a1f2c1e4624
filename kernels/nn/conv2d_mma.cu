// conv2d_mma: the dense (groups == 1) Conv2d of conv2d.cu on fp16 / bf16 tensor cores — variants v5_fp16
// (DT = LAB_F16) and v6_bf16 (LAB_BF16). Same operation, layouts, epilogue (bias, SiLU, residual, the
// optional pre-activation output pre, the optional SiLU-backward gate) and split-K partials as conv2d_tiled
// (reduced by conv2d_splitk_reduce of conv2d.cu); activations stay float32 in memory: the im2col values are
// rounded to DT as they are staged, the weights once on the host, and the products are mma.sync m16n8k16
// with float accumulation.
//
// conv2d_mma<DT, K, TM>: implicit GEMM out[co][p] = sum_r W[co][r] X[r][p] over r = (ci, ky, kx).
//   A CTA of 8 warps computes TM output channels x TN = 4096 / TM pixels (flattened y * Wo + x); each warp
//   owns 16 channels x 32 pixels (four n8 tiles). The reduction runs in chunks of 32 rows, double buffered in
//   shared memory, one __syncthreads per chunk:
//   - weights wh [C_out][red_pad] (DT patterns, each row zero-padded to red_pad, a multiple of 32) go global
//     -> shared with cp.async in 16-byte pieces, tile w_s[TM][32 + 8] (the A operand, row-major);
//   - the im2col chunk is read into registers one chunk ahead and rounded to DT into x_s once the current
//     chunk's products are issued (Im2colStaging<K, TN>). K > 1: each thread stages one pixel and TN / 8
//     consecutive rows (a warp's loads of one row are consecutive pixels) into x_s[TN][32 + 8] (pixel rows,
//     reduction columns: the B operand n-major). The rows' (channel, tap) are decomposed once per CTA into a
//     32-entry shared table two chunks ahead (Im2colTap: an int32 offset, so c_in * in_cs stays below
//     2^31), and each thread finds its pixel's in-image taps once as a bit mask: a staged value is a table
//     broadcast, a bit test and a load, where the divisions and bounds checks per value had made the 3x3
//     convs with 16 output channels issue-bound (ncu on the H200: 52 % SM throughput, 3 % DRAM, at 64 -> 16
//     channels, 80 x 80, batch 32);
//   - K == 1: a reduction row is an input channel, so each thread stages 4 consecutive pixels (a quad) of
//     TN / 32 consecutive rows, a row's quad one 16-byte load where the view keeps it aligned (stride 1, else
//     four scalar loads), into x_s[32][TN + 8] (the B operand k-major, read by transposed ldmatrix) as one
//     8-byte store: 2.4 SASS instructions a staged value at TM 64 (1.8 at TM 16) where the tap table's path
//     took 10 to 11, and a thread's main-loop iteration 110 instructions instead of 178 (TM 64).
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
#include "nn/mma_epilogue.cuh"
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

// How conv2d_mma stages its im2col operand, chunk after chunk: plan(table, r0) writes the tap table of the
// chunk at reduction row r0 (two chunks ahead, as the tables' barrier order wants), load(table) reads the
// next chunk into registers (one chunk ahead of the products; its taps in `table`), store rounds the loaded
// values to DT into an x_s tile of kTileElems elements, and load_b reads B fragments from a stored tile.
// K > 1 (this template): one Im2colRun a thread, x_s pixel-major [TN][kMmaLd] (the B operand n-major).
template <int K, int TN>
struct Im2colStaging {
  static constexpr int kRows = kMmaChunk * TN / kThreads;  // rows a thread stages per chunk
  static constexpr int kTileElems = TN * kMmaLd;
  long long in_cs;
  int r_end, w_in, col;
  Im2colRun<K, kRows> column;

  __device__ __forceinline__ Im2colStaging(const float* in_b, long long in_cs_, int px0, int plane_out,
                                           int w_out, int stride, int h_in, int w_in_, int /*r_begin*/,
                                           int r_end_)
      : in_cs(in_cs_),
        r_end(r_end_),
        w_in(w_in_),
        col(int(threadIdx.x) % TN),
        column(in_b, px0 + col, plane_out, w_out, stride, int(threadIdx.x) / TN * kRows, h_in, w_in_) {}

  __device__ __forceinline__ void plan(Im2colTap* table, int r0) const {
    find_chunk_taps<K>(table, r0, r_end, in_cs, w_in);
  }
  __device__ __forceinline__ void load(const Im2colTap* table) { column.load(table); }
  template <int DT>
  __device__ __forceinline__ void store(uint16_t* x_tile) const {
    column.template store<DT>(x_tile, col);
  }
  static __device__ __forceinline__ void load_b(uint32_t (&b)[4], const uint16_t* x_tile, int n0, int k0,
                                                int lane) {
    lab_load_b_rows_n<kMmaLd>(b, x_tile, n0, k0, lane);
  }
};

// K == 1: a reduction row is an input channel, and at stride 1 the pixels of a row are consecutive floats.
// Each thread stages kRows consecutive rows of one quad of 4 consecutive output pixels, the same quad for
// the whole reduction: a row's quad is one 16-byte load where the quad lies wholly in the plane and the view
// keeps it aligned (the image's and every channel's start on 16 bytes; a quad starts at a multiple of 4
// pixels), else four predicated scalar loads (stride > 1, unaligned views, the plane's end, the reduction's
// last rows). The tile is k-major, x_s[row][pixel] with rows padded by 8 elements: a quad goes in as one
// 8-byte store (a half warp's 16 quads are 128 consecutive bytes) and B comes by transposed ldmatrix (rows
// of 2 TN + 16 bytes put its eight 16-byte rows in distinct banks). The values and their k order are those
// of the tap-table path, so the products and sums are the same bit for bit; what goes is the table, the
// masks and the address arithmetic per value.
template <int TN>
struct Im2colStaging<1, TN> {
  static constexpr int kQuads = TN / 4;                        // pixel quads of a row
  static constexpr int kRows = kMmaChunk * kQuads / kThreads;  // rows a thread stages per chunk: TN / 32
  static constexpr int kLd = TN + 8;                           // row stride of the tile, in elements
  static constexpr int kTileElems = kMmaChunk * kLd;
  static_assert(kRows >= 1 && kThreads % kQuads == 0, "every thread one quad of whole rows");
  const float* next;  // the quad's first pixel in this thread's first row of the chunk load() reads next
  long long in_cs;
  int rows_left;  // reduction rows from that row on (r_end - its row; <= 0 past the end)
  int tile_at;    // where the thread's first row and first pixel go in a tile
  int x0;         // the quad's first pixel's output column
  int pixels;     // the plane's pixels from the quad's first on (<= 0: none, >= 4: all), compared unclamped
  int w_out, stride, w_in;
  bool whole;  // a row's quad is one aligned 16-byte load
  float4 v[kRows];

  __device__ __forceinline__ Im2colStaging(const float* in_b, long long in_cs_, int px0, int plane_out,
                                           int w_out_, int stride_, int /*h_in*/, int w_in_, int r_begin,
                                           int r_end)
      : in_cs(in_cs_), w_out(w_out_), stride(stride_), w_in(w_in_) {
    const int quad = int(threadIdx.x) % kQuads, row0 = int(threadIdx.x) / kQuads * kRows, p = px0 + 4 * quad;
    rows_left = r_end - (r_begin + row0);
    tile_at = row0 * kLd + 4 * quad;
    pixels = plane_out - p;  // as MmaChannelRow::store's `left` (mma_epilogue.cuh says why)
    const int y = pixels > 0 ? p / w_out : 0;
    x0 = pixels > 0 ? p % w_out : 0;
    next = in_b + (r_begin + row0) * in_cs + (y * w_in + x0) * stride;
    // p is a multiple of 4, so at stride 1 the quad is aligned where the image and channel starts are.
    whole = stride == 1 && pixels >= 4 && (reinterpret_cast<unsigned long long>(in_b) & 15) == 0 &&
            (in_cs & 3) == 0;
  }

  __device__ __forceinline__ void plan(Im2colTap*, int) const {}  // nothing to prepare

  // v[i] = the quad in row i of the thread's rows of the next chunk (chunks come in order), zero past r_end
  // and the plane. A thread whose rows all lie in the reduction takes the unpredicated 16-byte loads.
  __device__ __forceinline__ void load(const Im2colTap* /*table*/) {
    if (whole && rows_left >= kRows) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) v[i] = __ldg(reinterpret_cast<const float4*>(next + i * in_cs));
    } else {
      load_pixels();
    }
    next += kMmaChunk * in_cs;
    rows_left -= kMmaChunk;
  }

  // load() a pixel at a time: the pixels' offsets from the quad's first found by walking its output row(s).
  __device__ __forceinline__ void load_pixels() {
    int at[4], x = x0, offset = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      at[j] = offset;
      const bool wraps = ++x == w_out;  // the next pixel starts the next output row
      x = wraps ? 0 : x;
      offset += wraps ? (w_in - w_out + 1) * stride : stride;
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const float* row = next + i * in_cs;
      const bool in_rows = i < rows_left;
      v[i].x = in_rows && pixels > 0 ? __ldg(row + at[0]) : 0.0f;
      v[i].y = in_rows && pixels > 1 ? __ldg(row + at[1]) : 0.0f;
      v[i].z = in_rows && pixels > 2 ? __ldg(row + at[2]) : 0.0f;
      v[i].w = in_rows && pixels > 3 ? __ldg(row + at[3]) : 0.0f;
    }
  }

  // The loaded rows rounded to DT, one 8-byte store a row.
  template <int DT>
  __device__ __forceinline__ void store(uint16_t* x_tile) const {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      *reinterpret_cast<uint2*>(x_tile + tile_at + i * kLd) =
          make_uint2(lab_pack2<DT>(v[i].x, v[i].y), lab_pack2<DT>(v[i].z, v[i].w));
  }

  static __device__ __forceinline__ void load_b(uint32_t (&b)[4], const uint16_t* x_tile, int n0, int k0,
                                                int lane) {
    lab_load_b_rows_k<kLd>(b, x_tile, n0, k0, lane);
  }
};

// cp.async of the weight chunk at reduction row r0 (TM channels from co0, kMmaChunk columns) into w_s;
// channels past c_out are zero-filled. A fixed trip count (the pieces a thread issues, known at compile
// time): the loop from threadIdx.x with a run-time bound had compiled to ~45 instructions a chunk for one
// cp.async a thread at TM 64.
template <int TM>
__device__ __forceinline__ void stage_weights_async(uint16_t* w_s, const uint16_t* __restrict__ wh,
                                                    int red_pad, int r0, int co0, int c_out) {
  constexpr int kPieces = kMmaChunk / 8;  // 16-byte pieces per channel row
  constexpr int kTotal = TM * kPieces, kPerThread = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = int(threadIdx.x) + k * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
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
               long long out_cs, float* pre, long long pre_bs, long long pre_cs, const float* gate,
               long long gate_bs, long long gate_cs, int c_in, int c_out, int h_in, int w_in, int h_out,
               int w_out, int stride, int silu, int batch, int split_rows, float* partial) {
  constexpr int kChunk = nn::kMmaChunk, LD = nn::kMmaLd, TN = 4096 / TM;
  constexpr int kWarpCols = 8 / (TM / 16);  // warps along pixels
  static_assert(TN / kWarpCols == 32, "each warp owns 16 channels x 32 pixels");
  using Im2col = nn::Im2colStaging<K, TN>;
  __shared__ __align__(16) uint16_t w_s[2][TM * LD];
  __shared__ __align__(16) uint16_t x_s[2][Im2col::kTileElems];
  __shared__ nn::Im2colTap taps_s[2][kChunk];  // Im2col's tap tables (K > 1)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / kWarpCols, wn = warp % kWarpCols;
  const int b = blockIdx.z % batch, split = blockIdx.z / batch;
  const int co0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const int plane_out = h_out * w_out, reduction = c_in * K * K;
  const int r_begin = split * split_rows, r_end = min(reduction, r_begin + split_rows);
  const int chunks = (r_end - r_begin + kChunk - 1) / kChunk;
  Im2col im2col(in + b * in_bs, in_cs, px0, plane_out, w_out, stride, h_in, w_in, r_begin, r_end);

  nn::stage_weights_async<TM>(w_s[0], wh, red_pad, r_begin, co0, c_out);
  im2col.plan(taps_s[0], r_begin);
  if (chunks > 1) im2col.plan(taps_s[1], r_begin + kChunk);
  __syncthreads();
  im2col.load(taps_s[0]);
  im2col.template store<DT>(x_s[0]);
  lab_cp_async_wait<0>();
  __syncthreads();

  float acc[4][4] = {};
  for (int c = 0; c < chunks; ++c) {
    const int buf = c % 2;
    const bool more = c + 1 < chunks;
    if (more) {
      const int r_next = r_begin + (c + 1) * kChunk;
      nn::stage_weights_async<TM>(w_s[buf ^ 1], wh, red_pad, r_next, co0, c_out);
      im2col.load(taps_s[buf ^ 1]);
    }
#pragma unroll
    for (int kc = 0; kc < kChunk / 16; ++kc) {
      uint32_t a[4];
      lab_load_a<LD>(a, w_s[buf], wm * 16, kc * 16, lane);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bf[4];
        Im2col::load_b(bf, x_s[buf], wn * 32 + np * 16, kc * 16, lane);
        lab_mma_16816_pair<DT>(acc[2 * np], acc[2 * np + 1], a, bf);
      }
    }
    if (more) im2col.template store<DT>(x_s[buf ^ 1]);
    // Chunk c + 2's taps into the table chunk c's loads left (read in the previous step, before its barrier).
    if (c + 2 < chunks) im2col.plan(taps_s[buf], r_begin + (c + 2) * kChunk);
    lab_cp_async_wait<0>();
    __syncthreads();
  }

  // Each lane holds pixels 2t, 2t + 1 of four n8 tiles for two channels: the channels' rows are found once,
  // and a pixel pair goes out as one 8-byte access per plane where every view keeps pairs aligned.
  const int g = lane / 4, t = lane % 4;
  const bool pairs = nn::mma_pairs_aligned(plane_out, out, out_bs, out_cs, pre, pre_bs, pre_cs, residual, res_bs,
                                           res_cs, gate, gate_bs, gate_cs, partial);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int co = co0 + wm * 16 + g + 8 * half;
    if (co >= c_out) continue;
    const nn::MmaChannelRow row(co, b, split, batch, c_out, plane_out, bias, silu, out, out_bs, out_cs, pre,
                                pre_bs, pre_cs, residual, res_bs, res_cs, gate, gate_bs, gate_cs, partial);
    // Two pairs at a time: four at a time spilled conv2d_mma<0, 1, 64> (62 -> 64 registers, 4 bytes spilled).
#pragma unroll
    for (int nt0 = 0; nt0 < 4; nt0 += 2) {
      float v0[2], v1[2];
      int p[2], left[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        v0[i] = acc[nt0 + i][2 * half], v1[i] = acc[nt0 + i][2 * half + 1];
        p[i] = px0 + wn * 32 + (nt0 + i) * 8 + 2 * t, left[i] = plane_out - p[i];
      }
      row.store(v0, v1, p, left, pairs);
    }
  }
}

// The 3x3 stride-1 instances staged from a shared input patch (v7_fp16_patch / v8_bf16_patch) share this
// module.
#include "nn/conv2d_mma_patch.cu"

#endif  // LAB_NN_CONV2D_MMA_CU
