// maxpool2d_backward: the input gradient of maxpool2d (stride 1, padding K/2 with -inf, K odd; SPPF's pools).
// Each output window's gradient goes to the window's arg-max. Tie rule = PyTorch's CUDA max_pool2d: the
// window is scanned row by row from its top-left cell inside the plane, a cell replaces the running maximum
// when it is strictly greater or NaN (so the FIRST maximum in scan order wins a tie, the LAST NaN wins among
// NaNs), and a window whose cells are all -inf goes to its first cell.
//   dx[b, c, q] (+)= sum over the windows (y, x) that contain q, in row-major order, of
//                    dy[b, c, y, x] if argmax(window(y, x)) == q
// Deterministic gather, no atomics: one thread per input cell re-derives the arg-max of each of the (up to
// K x K) windows covering it (K^4 reads through the cache per cell; the SPPF planes are 20x20 at 640) and
// adds the gradients it wins in a fixed order, as PyTorch's CUDA backward does.
//
// Layouts: in, grad_out and grad_in [B, C, H, W] views (pointer, batch stride, channel stride; contiguous
// H*W planes). grad_in must not overlap in or grad_out. SPPF's chain of three pools is three launches (the
// executor's chain rule), each with accumulate = 1 into the gradient its concat slice already holds.
// Variants (the same sums in the same order, so the same bits):
//   maxpool2d_backward (v1_direct): one thread per input cell re-deriving the arg-max of each window covering
//     it: K^4 reads through the cache per cell. Block 256, grid (ceil(H*W / 256), C, B).
//   maxpool2d_backward_plane (v2_plane_smem): one CTA per plane (H*W <= kPoolPlaneSmemCells): the plane in
//     shared memory, then the arg-max of every window once (K^2 shared reads per window), then each cell
//     gathers from the K^2 arg-maxes around it. Block 256, grid (1, C, B), dynamic shared memory 8 H*W bytes
//     (the plane, then the arg-max indices).
#ifndef LAB_NN_MAXPOOL2D_BACKWARD_CU
#define LAB_NN_MAXPOOL2D_BACKWARD_CU
#include "common/lab.cuh"
#include "nn/gradient_store.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"
#include "nn/plane_backward_params.cuh"

namespace nn {

// The plane index of the arg-max of the window centred on (y, x) with radius r, by PyTorch's scan rule.
__device__ __forceinline__ int window_argmax(const float* plane, int h, int w, int y, int x, int r) {
  const int y0 = max(y - r, 0), y1 = min(y + r, h - 1), x0 = max(x - r, 0), x1 = min(x + r, w - 1);
  int best_index = y0 * w + x0;  // starting from the first cell is PyTorch's -inf start, without an infinity
  float best = plane[best_index];
  for (int iy = y0; iy <= y1; ++iy)
    for (int ix = x0; ix <= x1; ++ix) {
      const float v = plane[iy * w + ix];
      if (v > best || v != v) {
        best = v;
        best_index = iy * w + ix;
      }
    }
  return best_index;
}

}  // namespace nn

__global__ void __launch_bounds__(nn::kThreads)
    maxpool2d_backward(const lab::MaxPool2dBackwardParams params) {
  const int h = params.h, w = params.w, r = params.kernel / 2;
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= h * w) return;
  const int c = blockIdx.y, b = blockIdx.z;
  const float* __restrict__ in = params.in.data + b * params.in.batch_stride + c * params.in.channel_stride;
  const float* __restrict__ dy =
      params.grad_out.data + b * params.grad_out.batch_stride + c * params.grad_out.channel_stride;
  const int qy = q / w, qx = q % w;
  float sum = 0.0f;
  for (int y = max(qy - r, 0); y <= min(qy + r, h - 1); ++y)
    for (int x = max(qx - r, 0); x <= min(qx + r, w - 1); ++x)
      if (nn::window_argmax(in, h, w, y, x, r) == q) sum += dy[y * w + x];
  nn::store_gradient(
      params.grad_in.data + b * params.grad_in.batch_stride + c * params.grad_in.channel_stride + q, sum,
      params.accumulate);
}

__global__ void __launch_bounds__(nn::kThreads)
    maxpool2d_backward_plane(const lab::MaxPool2dBackwardParams params) {
  LAB_DYNAMIC_SHARED(float, plane);
  const int h = params.h, w = params.w, r = params.kernel / 2, cells = h * w;
  int* argmax = reinterpret_cast<int*>(plane + cells);
  const int c = blockIdx.y, b = blockIdx.z;
  const float* __restrict__ in = params.in.data + b * params.in.batch_stride + c * params.in.channel_stride;
  const float* __restrict__ dy =
      params.grad_out.data + b * params.grad_out.batch_stride + c * params.grad_out.channel_stride;
  float* grad_in = params.grad_in.data + b * params.grad_in.batch_stride + c * params.grad_in.channel_stride;
  for (int p = threadIdx.x; p < cells; p += blockDim.x) plane[p] = in[p];
  __syncthreads();
  for (int p = threadIdx.x; p < cells; p += blockDim.x)
    argmax[p] = nn::window_argmax(plane, h, w, p / w, p % w, r);
  __syncthreads();
  for (int q = threadIdx.x; q < cells; q += blockDim.x) {
    const int qy = q / w, qx = q % w;
    float sum = 0.0f;
    for (int y = max(qy - r, 0); y <= min(qy + r, h - 1); ++y)
      for (int x = max(qx - r, 0); x <= min(qx + r, w - 1); ++x)
        if (argmax[y * w + x] == q) sum += dy[y * w + x];
    nn::store_gradient(grad_in + q, sum, params.accumulate);
  }
}

#endif  // LAB_NN_MAXPOOL2D_BACKWARD_CU
