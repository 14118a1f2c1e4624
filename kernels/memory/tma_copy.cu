// tma_copy: a probe of the TMA + mbarrier pipeline (common/lab_tma.cuh, common/lab_mbarrier.cuh) on both
// backends. Warp 0 (one lane) is the producer: it walks the block's tiles and issues a TMA load of each into
// a ring of `stages` shared-memory slots, waiting on the slot's `empty` mbarrier before reusing it and
// announcing the bytes on its `full` mbarrier. Warps 1-2 consume alternate tiles: wait on `full`, copy the
// tile out of the (swizzled) slot into their own unswizzled staging slot, release the slot on `empty`, fence
// the staging writes for the copy engine and TMA-store the tile.
//
// tma_copy_tile<SWIZZLE>: y = x for x, y [rows][cols] float, boxes of box_rows x box_cols, x's map swizzled
// by
//   SWIZZLE (LAB_SWIZZLE_* of common/lab_swizzle.cuh), y's unswizzled; edges zero-filled on load, clipped on
//   store.
// tma_copy_im2col<SWIZZLE>: the im2col matrix of a 3x3, pad-1 convolution of stride s (1 or 2),
//   y[p][tap][c] = x[n][s oy + ky - 1][s ox + kx - 1][c] (zero outside the image) for output pixel
//   p = (n, oy, ox) and tap = 3 ky + kx, x NHWC float; one im2col TMA load per (pixel tile, tap, channel
//   tile) with im2col offsets (kx, ky), the map's traversal strides s walking the output pixels.
// Grid: any number of blocks, each takes tiles blockIdx.x, + gridDim.x, ...; block 96 threads; dynamic shared
// memory 1024 + (stages + 2) * 4096 bytes (slots aligned to the 1024-byte swizzle pattern).
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_tensor_map.cuh"
#include "common/lab_mbarrier.cuh"
#include "common/lab_swizzle.cuh"
#include "common/lab_wgmma.cuh"
#include "common/lab_tma.cuh"
#include "memory/tma_copy_params.cuh"

#define TMA_COPY_SLOT_BYTES 4096
#define TMA_COPY_CONSUMERS 2

template <int SWIZZLE, bool IM2COL>
__device__ __forceinline__ void tma_copy_pipeline(const lab::TmaCopyParams& p) {
  __shared__ __align__(8) uint64_t full[4], empty[4];
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* slots =
      raw + ((1024u - unsigned(reinterpret_cast<unsigned long long>(raw) % 1024u)) % 1024u);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int mine =
      p.tiles > int(blockIdx.x) ? (p.tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  const unsigned tile_bytes = unsigned(p.box_rows * p.box_cols) * 4u;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      lab_mbarrier_init(&full[s], 1);
      lab_mbarrier_init(&empty[s], 1);
    }
    lab_fence_mbarrier_init();
    lab_tma_prefetch_map(&p.src);
    lab_tma_prefetch_map(&p.dst);
  }
  __syncthreads();

  if (warp == 0) {
    if (lane == 0) {
      for (int k = 0; k < mine; ++k) {
        const int s = k % p.stages, t = int(blockIdx.x) + k * int(gridDim.x);
        if (k >= p.stages) lab_mbarrier_wait_parity(&empty[s], unsigned(k / p.stages - 1) & 1u);
        lab_mbarrier_arrive_expect_tx(&full[s], tile_bytes);
        unsigned char* slot = slots + s * TMA_COPY_SLOT_BYTES;
        const int x0 = (t % p.tiles_x) * p.box_cols;
        if (IM2COL) {
          const int tap = t / p.tiles_x % 9, pixel = t / p.tiles_x / 9 * p.box_rows;
          const int wo = (p.w - 1) / p.stride + 1, ho = (p.h - 1) / p.stride + 1;
          lab_tma_load_im2col_4d(slot, &p.src, &full[s], x0, pixel % wo * p.stride - 1,
                                 pixel / wo % ho * p.stride - 1, pixel / (wo * ho), (unsigned short)(tap % 3),
                                 (unsigned short)(tap / 3));
        } else {
          lab_tma_load_2d(slot, &p.src, &full[s], x0, t / p.tiles_x * p.box_rows);
        }
      }
    }
    return;
  }

  const int consumer = warp - 1;
  unsigned char* staging = slots + (p.stages + consumer) * TMA_COPY_SLOT_BYTES;
  for (int k = consumer; k < mine; k += TMA_COPY_CONSUMERS) {
    const int s = k % p.stages, t = int(blockIdx.x) + k * int(gridDim.x);
    lab_mbarrier_wait_parity(&full[s], unsigned(k / p.stages) & 1u);
    if (lane == 0) lab_tma_store_wait_read<0>();  // the previous store has read the staging slot
    __syncwarp();
    const unsigned char* slot = slots + s * TMA_COPY_SLOT_BYTES;
    const unsigned row_bytes = unsigned(p.box_cols) * 4u;
    for (int e = lane; e < p.box_rows * p.box_cols; e += 32) {
      const unsigned logical = unsigned(e / p.box_cols) * row_bytes + unsigned(e % p.box_cols) * 4u;
      *reinterpret_cast<float*>(staging + e * 4) =
          *reinterpret_cast<const float*>(slot + lab_swizzle_address(SWIZZLE, logical));
    }
    lab_fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) {
      lab_mbarrier_arrive(&empty[s]);
      const int x0 = (t % p.tiles_x) * p.box_cols;
      if (IM2COL)
        lab_tma_store_3d(&p.dst, staging, x0, t / p.tiles_x % 9, t / p.tiles_x / 9 * p.box_rows);
      else
        lab_tma_store_2d(&p.dst, staging, x0, t / p.tiles_x * p.box_rows);
      lab_tma_store_commit();
    }
  }
  if (lane == 0) lab_tma_store_wait_read<0>();
}

template <int SWIZZLE>
__global__ void __launch_bounds__(96) tma_copy_tile(const __grid_constant__ lab::TmaCopyParams p) {
  tma_copy_pipeline<SWIZZLE, false>(p);
}

template <int SWIZZLE>
__global__ void __launch_bounds__(96) tma_copy_im2col(const __grid_constant__ lab::TmaCopyParams p) {
  tma_copy_pipeline<SWIZZLE, true>(p);
}
