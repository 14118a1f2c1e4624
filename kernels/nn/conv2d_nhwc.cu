// conv2d_nhwc: the dense Conv2d (1x1 stride 1, 3x3 stride 1 or 2, padding K / 2) on NHWC fp16 / bf16 or
// float (tf32 products) activations for Hopper (sm_90a) — an implicit GEMM on wgmma with operands staged by
// TMA on an mbarrier pipeline, warp specialised and persistent, with the fused epilogue the C3k2 / Concat
// blocks need.
//
// GEMM view: out[m][co] = sum_{tap, ci} A[m][tap, ci] * W[co][tap][ci], m = (n, oy, ox) an output pixel
// (M = N * Ho * Wo), the reduction walked tap by tap, BK channels at a time (Conv2dNhwcParams for layouts).
//   - A tile (BM pixels x BK channels): 3x3, one im2col TMA load per (tap, channel block) from the tile's
//     first output pixel (ox * stride - 1, oy * stride - 1, n) with the tap's offsets (kx, ky); the map's
//     bounding box and traversal strides walk the next BM - 1 output pixels across rows and images, padding
//     and pixels past the last image load as zeros. 1x1: a tiled load of rows m0.. of [M][C_in].
//   - B tile (BN output channels x BK): a tiled load of the weights at (channel block, tap, n0).
//   Rows of both tiles are BK elements, RB = BK * 2 (16-bit) or BK * 4 (float) bytes, in the swizzle of that
//   width (RB 128: 128B, 64: 64B, 32: 32B), which is the K-major canonical layout of lab_wgmma.cuh:
//   descriptors with SBO 8 rows, +32 bytes per product step (k16 in 16 bits, k8 in tf32: both 32 bytes).
// Output tiles are BM = 64 * CONSUMERS pixels x BN channels, numbered pixel tile major (tile t: pixels
// t / n_tiles, channels t % n_tiles, so CTAs running side by side share their input rows in L2). The grid is
// persistent: CTA b computes tiles b, b + gridDim.x, ... (the op launches as many CTAs as the SMs hold).
// A CTA is 1 + CONSUMERS warpgroups (384 or 256 threads); CONSUMERS 1 doubles the tiles of a small layer.
//   Warpgroup 0, the producer (with two consumers it gives registers back, setmaxnreg.dec); one thread walks
//   the reduction steps (taps x channel blocks) of every tile of the CTA, counting them on one step counter
//   for the ring's slots and phases, and loads A and B of each into a ring of STAGES slots: it waits for the
//   slot's `empty` mbarrier (from its second round), announces the slot's bytes on `full` and issues both
//   copies. So the next tile's first loads are in flight while the consumers run this tile's epilogue. The
//   B tiles of the first STAGES steps are loaded before griddepcontrol.wait (the weights are constant), under
//   the previous launch; only their A tiles wait for it.
//   Warpgroups 1.. are the consumers (setmaxnreg.inc with two), warpgroup c owning pixels 64 (c - 1) .. + 63
//   of each tile (the two cooperate on one tile: they share its B tile, and the ring's slots stay whole):
//   per tile, zero the accumulators; per step, wait on `full`, BK / 16 wgmma m64nBNk16 (A and B from shared
//   memory, float accumulators), commit, and once the previous step's group has completed (wait_group 1)
//   release that step's slot on `empty`; the tile's last slot is released once its products are done,
//   before the epilogue.
// Epilogue, from the accumulator registers (row 16 w + g + 8 h, channels 8 j + 2 q, +1 of lab_wgmma.cuh):
//   the four threads of a quad hold the 8 channels of a (row half h, group j) piece two each; a transpose
//   within the quad (shuffles) gives each thread four whole pieces of the quad instead, so it computes
//   v = act(acc + bias[co]) (SiLU or none), + residual[m][co] when given (8 channels: one 16-byte load in 16
//   bits, two in float), rounds to the element type and stores 8 channels at a time into out[m * out_pitch +
//   co]: a channel slice of a wider NHWC buffer when out points at the slice's first channel.
// Split-K (conv2d_nhwc_splitk, for layers whose tiles leave most SMs idle, as at batch 1): S CTAs share a
//   tile, each reducing a contiguous range of its steps; each stores its float32 accumulators into its slice
//   of a workspace and arrives on the tile's counter (__threadfence, then atomicAdd); the last to arrive sums
//   the S slices in slice order and runs the same epilogue, and resets the counter to zero. One launch, no
//   second reduce kernel: the PDL chain and the graph keep one node per conv, and the counters need no
//   clearing between replays.
// Precision: products of 16-bit values (or of tf32 values: the tensor cores drop the low 13 fraction bits of
//   float operands) summed in float32; the output rounded once to 16 bits or to tf32 (split-K: the S partial
//   sums, each float32, added in slice order).
// 3xTF32 (DT LAB_F32X3: float activations at float32 accuracy): a = a_hi + a_lo with a_hi what the tensor
//   cores read of a (its low 13 fraction bits dropped) and a_lo = a - a_hi, exact; each product is a_hi b_hi
//   + a_hi b_lo + a_lo b_hi, three wgmma (a_lo b_lo, about 2^-22 of it, and the lo parts' own truncation left
//   out). The weights come split on the host (w_map: b_hi = b rounded to nearest tf32, w_lo_map: b - b_hi), a
//   stage holding A, B, A_lo and B_lo; each consumer warpgroup writes A_lo of its own 64 rows from A (the
//   same byte offsets, so the same swizzle), fences the writes into the async proxy and meets its warpgroup
//   on a named barrier before its products. Each step's products go into a fresh accumulator that is added
//   to the tile's on the FMA pipe (rounded to nearest) once they complete: wgmma's own accumulation of float
//   sums drops bits (measured on the H200 over yolo26n with the three products accumulated in place: worst
//   tensor rel_l2 4.9e-5, against 1.3e-6 on the emulator, whose sums are exact; with a fresh accumulator
//   every step 4.0e-6), and that loss grows with every product added into a large accumulator. The next
//   step's A_lo is written while a step's products run (split3_reduce); the CTA waits for the products
//   before the adds (no second group in flight: two alternating accumulators spilled, 8.41 ms against 7.00
//   for the batch-32 forward, and two groups over the channel halves measured 8.91), and takes one SM share
//   fewer (conv2d_nhwc_ctas_per_sm) for the registers. The output is stored unrounded.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_tensor_map.cuh"
#include "common/lab_mbarrier.cuh"
#include "common/lab_swizzle.cuh"
#include "common/lab_tma.cuh"
#include "common/lab_wgmma.cuh"
#include "common/lab_named_barrier.cuh"
#include "common/lab_grid_dependency.cuh"
#include "nn/nn_common.cuh"
#include "nn/nhwc_element.cuh"
#include "nn/conv2d_nhwc_params.cuh"

namespace conv_nhwc {

constexpr unsigned kSwizzleAtom = 1024;  // the 128-byte swizzle's pattern: where the stages start

// The swizzle whose rows are RB bytes long.
__device__ __forceinline__ constexpr int swizzle_of(int rb) {
  return rb == 128 ? LAB_SWIZZLE_128B : rb == 64 ? LAB_SWIZZLE_64B : LAB_SWIZZLE_32B;
}

// The K-major descriptor of product step `kk` (32 bytes of a row) of a tile of RB-byte rows (8-row groups 8 *
// RB apart).
template <int RB>
__device__ __forceinline__ unsigned long long k_major_desc(const unsigned char* tile, int kk) {
  return lab_wgmma_desc(tile + 32 * kk, 16, 8 * RB, swizzle_of(RB));
}

// Registers a thread of a CTA of THREADS threads gets at launch when CTAS of them share the SM's 64 K
// (allocated 8 at a time), and what each consumer of two may grow to once the producer has dropped to 40.
__device__ __forceinline__ constexpr int launch_registers(int threads, int ctas) {
  return 65536 / (threads * ctas) / 8 * 8;
}
__device__ __forceinline__ constexpr int consumer_registers(int launch) {
  return (3 * launch - 40) / 2 / 8 * 8;
}

// x minus what the tensor cores read of it (x with its low 13 fraction bits dropped): exact in float.
__device__ __forceinline__ float tf32_low(float x) {
  return x - __uint_as_float(__float_as_uint(x) & ~0x1fffu);
}

// Transposes four values across the four threads of a quad (lanes 4 g .. 4 g + 3, q the lane's place): value
// i of thread q becomes value q of thread i. Two butterfly rounds (lane xor 2, then xor 1) each swap the
// values whose index bit differs from the thread's: four shuffles.
__device__ __forceinline__ void quad_transpose(float (&a)[4], int q) {
  const bool high = q & 2, low = q & 1;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float v = __shfl_xor_sync(LAB_FULL_MASK, high ? a[r] : a[r + 2], 2);
    if (high)
      a[r] = v;
    else
      a[r + 2] = v;
  }
#pragma unroll
  for (int r = 0; r < 4; r += 2) {
    const float v = __shfl_xor_sync(LAB_FULL_MASK, low ? a[r] : a[r + 1], 1);
    if (low)
      a[r] = v;
    else
      a[r + 1] = v;
  }
}

// Split-K (conv2d_nhwc_splitk): adds the consumer's accumulators `d` (the reduction steps of `slice`) to the
// tile's other slices. Every thread stores its BN / 2 floats into the slice's part of `region` (the tile's
// [splits][BN / 8][128] float4s, thread fastest), fences, and the warpgroup arrives on the tile's counter
// once. The last to arrive resets the counter to zero (for the next launch or graph replay), sums slices 0 ..
// splits - 1 in that order into d (the same float additions whichever slice arrived last: bitwise the same
// output every run) and returns true: it runs the epilogue. The others return false.
template <int BN>
__device__ __forceinline__ bool gather_splits(float (&d)[BN / 2], float4* region, unsigned* arrival,
                                              int slice, int splits, int t) {
  constexpr int kVectors = BN / 8;  // float4s of accumulators a thread holds
  __shared__ int last;              // the warpgroup's arrival was the tile's last
#pragma unroll
  for (int v = 0; v < kVectors; ++v)
    region[(slice * kVectors + v) * 128 + t] =
        make_float4(d[4 * v], d[4 * v + 1], d[4 * v + 2], d[4 * v + 3]);
  __threadfence();  // the slice is visible device-wide before the arrival that announces it
  lab_named_barrier_sync(1, 128);
  if (t == 0) {
    last = atomicAdd(arrival, 1u) == unsigned(splits - 1);
    if (last) atomicExch(arrival, 0u);
  }
  lab_named_barrier_sync(1, 128);
  if (!last) return false;
  __threadfence();  // the other slices' stores, seen through the counter, before reading them
#pragma unroll
  for (int v = 0; v < kVectors; ++v) {
    float4 sum = __ldcg(&region[v * 128 + t]);
    for (int s = 1; s < splits; ++s) {
      const float4 x = __ldcg(&region[(s * kVectors + v) * 128 + t]);
      sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
    }
    d[4 * v] = sum.x, d[4 * v + 1] = sum.y, d[4 * v + 2] = sum.z, d[4 * v + 3] = sum.w;
  }
  return true;
}

// 3xTF32: once stage slot `a` (this consumer warpgroup's 64 rows of its A tile) is full, writes their low
// parts at the same byte offsets + lo_bytes (so in the same swizzle), position by position, fences the writes
// into the async proxy and meets the warpgroup (thread t) on named barrier 2 + c before products read them.
template <int RB>
__device__ __forceinline__ void write_a_low(unsigned char* a, unsigned lo_bytes, uint64_t* full,
                                            unsigned parity, int t, int c) {
  lab_mbarrier_wait_parity(full, parity);
#pragma unroll
  for (int off = 16 * t; off < 64 * RB; off += 16 * 128) {
    const float4 v = *reinterpret_cast<const float4*>(a + off);
    *reinterpret_cast<float4*>(a + lo_bytes + off) =
        make_float4(tf32_low(v.x), tf32_low(v.y), tf32_low(v.z), tf32_low(v.w));
  }
  lab_fence_proxy_async_shared();
  lab_named_barrier_sync(2 + c, 128);
}

// 3xTF32: consumer warpgroup c's reduction of one tile's `steps` steps into d (the CTA's step counter k at the
// first; stage slots from `base`, A at their start, B a_bytes in, A_lo and B_lo lo_bytes after them). Each
// step's products a_hi b_hi + a_hi b_lo + a_lo b_hi (k8 at a time) go into the fresh accumulator `part`,
// which the FMA pipe adds to d once they complete (wgmma's own float sums drop bits). The next step's A_lo is
// written while this step's products run, so the tensor cores wait only for the adds.
template <int BN, int RB, int STAGES>
__device__ __forceinline__ void split3_reduce(float (&d)[BN / 2], unsigned char* base, unsigned stage_bytes,
                                              unsigned a_bytes, unsigned lo_bytes, uint64_t* full,
                                              uint64_t* empty, int k, int steps, int c, int t) {
  float part[BN / 2];                     // the products of the step in flight
  unsigned char* a = base + c * 64 * RB;  // this warpgroup's rows of slot 0's A tile
  write_a_low<RB>(a + k % STAGES * stage_bytes, lo_bytes, &full[k % STAGES], (k / STAGES) & 1, t, c);
  for (int j = 0; j < steps; ++j, ++k) {
    const unsigned char* a_k = a + k % STAGES * stage_bytes;
    const unsigned char* b_k = base + k % STAGES * stage_bytes + a_bytes;
    lab_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < RB / 32; ++kk) {
      lab_wgmma_ss<LAB_F32, BN, 0, 0>(part, k_major_desc<RB>(a_k, kk), k_major_desc<RB>(b_k, kk), kk > 0);
      lab_wgmma_ss<LAB_F32, BN, 0, 0>(part, k_major_desc<RB>(a_k, kk), k_major_desc<RB>(b_k + lo_bytes, kk),
                                      1);
      lab_wgmma_ss<LAB_F32, BN, 0, 0>(part, k_major_desc<RB>(a_k + lo_bytes, kk), k_major_desc<RB>(b_k, kk),
                                      1);
    }
    lab_wgmma_commit_group();
    if (j + 1 < steps)
      write_a_low<RB>(a + (k + 1) % STAGES * stage_bytes, lo_bytes, &full[(k + 1) % STAGES],
                      ((k + 1) / STAGES) & 1, t, c);
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(part);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] += part[i];
    lab_mbarrier_arrive(&empty[k % STAGES]);  // this step's slot: the producer refills it now
  }
}

}  // namespace conv_nhwc

// The kernels' body (at global scope, as the kernels: LAB_DYNAMIC_SHARED's symbol stays the same). Work unit
// u of the persistent grid: output tile u / splits, reduction steps [slice * steps / splits, (slice + 1) *
// steps / splits) of it, slice = u % splits. conv2d_nhwc: splits 1 (whole tiles, SPLIT false);
// conv2d_nhwc_splitk: SPLIT true, one consumer, its workspace in `partial` and `arrivals`.
template <int DT, int KSIZE, int BN, int BK, int STAGES, int CONSUMERS, bool SPLIT>
__device__ __forceinline__ void conv2d_nhwc_body(const lab::Conv2dNhwcParams& p, float* partial,
                                                 unsigned* arrivals, int splits) {
  using namespace conv_nhwc;
  constexpr bool kSplit3 = DT == LAB_F32X3;  // 3xTF32 products
  static_assert(KSIZE == 1 || KSIZE == 3, "1x1 or 3x3");
  constexpr int RB = BK * int(sizeof(nn::nhwc_t<DT>));  // bytes of a tile row
  static_assert(RB == 32 || RB == 64 || RB == 128, "BK: one swizzle row of 32, 64 or 128 bytes");
  static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
  static_assert(!SPLIT || CONSUMERS == 1, "split-K: one consumer warpgroup (BM 64)");
  constexpr int BM = 64 * CONSUMERS;
  constexpr unsigned a_bytes = BM * RB, lo_bytes = (BM + BN) * RB;  // A_lo and B_lo follow A and B (3xTF32)
  constexpr unsigned stage_bytes = lab::conv2d_nhwc_stage_bytes(BM, BN, RB, kSplit3 ? 2 : 1);
  constexpr unsigned load_bytes = (BM + (kSplit3 ? 2 : 1) * BN) * RB;  // what TMA brings into a stage
  constexpr int launch_regs =
      launch_registers(128 * (1 + CONSUMERS), lab::conv2d_nhwc_ctas_per_sm(BN, CONSUMERS, kSplit3 ? 2 : 1));
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* base = lab_smem_align_1024(raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + STAGES * stage_bytes);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x, warpgroup = tid / 128;
  const int steps = KSIZE * KSIZE * p.channel_blocks;  // per tile
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      lab_mbarrier_init(&full[s], 1);
      lab_mbarrier_init(&empty[s], 128 * CONSUMERS);  // every consumer thread
    }
    lab_fence_mbarrier_init();
    lab_tma_prefetch_map(&p.x_map);
    lab_tma_prefetch_map(&p.w_map);
    if (kSplit3) lab_tma_prefetch_map(&p.w_lo_map);
  }
  __syncthreads();
  // The weights are the op's own and no launch writes them, so the producer loads the B tiles of its first
  // unit's first STAGES steps before the wait below; `full` counts their A tiles' bytes too, loaded after it.
  int weights_ahead = 0;
  if (tid == 0 && blockIdx.x < p.tiles * splits) {
    const int tile = blockIdx.x / splits, slice = blockIdx.x % splits;
    const int n0 = tile % p.n_tiles * BN, first = slice * steps / splits;
    weights_ahead = min(STAGES, (slice + 1) * steps / splits - first);
    for (int k = 0; k < weights_ahead; ++k) {
      const int step = first + k, tap = step / p.channel_blocks, c0 = step % p.channel_blocks * BK;
      unsigned char* slot = base + k * stage_bytes;
      lab_mbarrier_arrive_expect_tx(&full[k], load_bytes);
      lab_tma_load_3d(slot + a_bytes, &p.w_map, &full[k], c0, tap, n0);
      if (kSplit3) lab_tma_load_3d(slot + lo_bytes + a_bytes, &p.w_lo_map, &full[k], c0, tap, n0);
    }
  }
  // Programmatic Dependent Launch: the setup above overlaps the previous launch; the TMA loads of the input,
  // the residual loads and the stores come after its completion. The next launch may start now: all of
  // this grid's CTAs are resident, so its CTAs only take room this grid leaves free and run their setup.
  lab_grid_dependency_wait();
  lab_launch_dependents();

  if (warpgroup == 0) {  // the producer
    if (CONSUMERS == 2) lab_setmaxnreg_dec<40>();
    if (tid != 0) return;
    int k = 0;  // the CTA's step counter over all its units: slot k % STAGES, round k / STAGES
    for (int unit = blockIdx.x; unit < p.tiles * splits; unit += gridDim.x) {
      const int tile = unit / splits, slice = unit % splits;
      const int m0 = tile / p.n_tiles * BM, n0 = tile % p.n_tiles * BN;
      const int plane = p.ho * p.wo, image = m0 / plane, oy = m0 % plane / p.wo, ox = m0 % p.wo;
      const int last = (slice + 1) * steps / splits;
      for (int step = slice * steps / splits; step < last; ++step, ++k) {
        const int s = k % STAGES, tap = step / p.channel_blocks, c0 = step % p.channel_blocks * BK;
        if (k >= STAGES) lab_mbarrier_wait_parity(&empty[s], (k / STAGES - 1) & 1);
        unsigned char* slot = base + s * stage_bytes;
        if (k >= weights_ahead) lab_mbarrier_arrive_expect_tx(&full[s], load_bytes);
        if (KSIZE == 1)
          lab_tma_load_2d(slot, &p.x_map, &full[s], c0, m0);
        else
          lab_tma_load_im2col_4d(slot, &p.x_map, &full[s], c0, ox * p.stride - 1, oy * p.stride - 1, image,
                                 (unsigned short)(tap % 3), (unsigned short)(tap / 3));
        if (k >= weights_ahead) {
          lab_tma_load_3d(slot + a_bytes, &p.w_map, &full[s], c0, tap, n0);
          if (kSplit3) lab_tma_load_3d(slot + lo_bytes + a_bytes, &p.w_lo_map, &full[s], c0, tap, n0);
        }
      }
    }
    return;
  }

  // A consumer: pixels m0 + 64 c .. + 63 of each tile. (One consumer keeps the registers it launched with.)
  if (CONSUMERS == 2) lab_setmaxnreg_inc<consumer_registers(launch_regs)>();
  const int c = warpgroup - 1;
  const int t = tid % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
  constexpr int kPieces = BN / 4;  // (row half, 8-channel group) pieces of a thread's quad: 2 x BN / 8
  int k = 0;                       // the producer's step counter
  for (int unit = blockIdx.x; unit < p.tiles * splits; unit += gridDim.x) {
    const int tile = unit / splits, slice = unit % splits;
    const int m0 = tile / p.n_tiles * BM, n0 = tile % p.n_tiles * BN;
    const int first = slice * steps / splits, last = (slice + 1) * steps / splits;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
    if constexpr (kSplit3) {
      split3_reduce<BN, RB, STAGES>(d, base, stage_bytes, a_bytes, lo_bytes, full, empty, k, last - first, c,
                                    t);
      k += last - first;
    } else {
      for (int step = first; step < last; ++step, ++k) {
        const int s = k % STAGES;
        const unsigned char* a = base + s * stage_bytes + c * 64 * RB;
        const unsigned char* b = base + s * stage_bytes + a_bytes;
        lab_mbarrier_wait_parity(&full[s], (k / STAGES) & 1);
        lab_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < RB / 32; ++kk)
          lab_wgmma_ss<DT, BN, 0, 0>(d, k_major_desc<RB>(a, kk), k_major_desc<RB>(b, kk), 1);
        lab_wgmma_commit_group();
        lab_wgmma_wait_group<1>();  // the previous step's products are done: its slot is free
        if (step > first) lab_mbarrier_arrive(&empty[(k - 1) % STAGES]);
      }
      lab_wgmma_wait_group<0>();
      lab_wgmma_hold(d);
      lab_mbarrier_arrive(&empty[(k - 1) % STAGES]);  // the tile's last slot: the producer refills it now
    }
    if constexpr (SPLIT) {
      float4* region = reinterpret_cast<float4*>(partial) + size_t(tile) * splits * (BN / 8) * 128;
      if (!gather_splits<BN>(d, region, &arrivals[tile], slice, splits, t)) continue;
    }

    // The tile's (row half h, channel group j) pieces, four at a time: thread q of a quad gets piece p0 + q's
    // 8 channels of its row, then adds bias (+ residual) and stores them as 16 bytes.
#pragma unroll
    for (int p0 = 0; p0 < kPieces; p0 += 4) {
      float even[4], odd[4];  // piece p0 + k's channels 8 j + 2 q (even) and + 1 (odd) of this thread
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int h = (p0 + k) / (BN / 8), j = (p0 + k) % (BN / 8);
        even[k] = d[4 * j + 2 * h], odd[k] = d[4 * j + 2 * h + 1];
      }
      quad_transpose(even, q), quad_transpose(odd, q);  // now: piece p0 + q's channels 8 j + 2 i (+ 1)
      const int h = (p0 + q) / (BN / 8), j = (p0 + q) % (BN / 8);
      const int m = m0 + 64 * c + 16 * w + g + 8 * h, co = n0 + 8 * j;
      if (m >= p.m || co >= p.c_out) continue;  // c_out is a multiple of 8: the group is inside or outside
      float v[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = nn::bias_act(even[i], p.bias[co + 2 * i], p.silu);
        v[2 * i + 1] = nn::bias_act(odd[i], p.bias[co + 2 * i + 1], p.silu);
      }
      if (p.residual) {
        float r[8];
        nn::nhwc_load8<DT>(static_cast<const nn::nhwc_t<DT>*>(p.residual) + size_t(m) * p.res_pitch + co, r);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += r[i];
      }
      nn::nhwc_store8<DT>(static_cast<nn::nhwc_t<DT>*>(p.out) + size_t(m) * p.out_pitch + co, v);
    }
  }
}

// DT LAB_F16, LAB_BF16, LAB_F32 or LAB_F32X3; KSIZE 1 or 3; BN 16, 32, 64 or 128; BK 16, 32 or 64 16-bit
// channels or 8, 16 or 32 float ones; CONSUMERS 1 or 2. Block 128 * (1 + CONSUMERS), dynamic shared memory
// lab::conv2d_nhwc_shared_bytes(64 * CONSUMERS, BN, BK * element bytes, operands, STAGES), grid at most the
// tile count. lab::conv2d_nhwc_ctas_per_sm CTAs share an SM (their registers bounded to fit), so one CTA's
// epilogue overlaps the others' products and loads.
template <int DT, int KSIZE, int BN, int BK, int STAGES, int CONSUMERS>
__global__ void __launch_bounds__(128 * (1 + CONSUMERS),
                                  lab::conv2d_nhwc_ctas_per_sm(BN, CONSUMERS, DT == LAB_F32X3 ? 2 : 1))
    conv2d_nhwc(const __grid_constant__ lab::Conv2dNhwcParams p) {
  conv2d_nhwc_body<DT, KSIZE, BN, BK, STAGES, CONSUMERS, false>(p, nullptr, nullptr, 1);
}

// The split-K mode (Conv2dNhwcSplitParams): one consumer warpgroup (block 256, BM 64), grid at most tiles x
// splits and lab::conv2d_nhwc_splitk_ctas_per_sm CTAs an SM, dynamic shared memory
// lab::conv2d_nhwc_shared_bytes(64, BN, BK * element bytes, operands, STAGES). For layers whose output
// tiles leave most SMs idle: splits CTAs share each tile's reduction, the last to finish runs the epilogue.
template <int DT, int KSIZE, int BN, int BK, int STAGES>
__global__ void __launch_bounds__(256, lab::conv2d_nhwc_splitk_ctas_per_sm())
    conv2d_nhwc_splitk(const __grid_constant__ lab::Conv2dNhwcSplitParams p) {
  conv2d_nhwc_body<DT, KSIZE, BN, BK, STAGES, 1, true>(p.conv, p.partial, p.arrivals, p.splits);
}
