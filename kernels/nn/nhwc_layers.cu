// nhwc_layers: YOLO26's layers besides the dense convolutions and attention on NHWC activations, 16-bit (fp16
// or bf16, DT = LAB_F16 / LAB_BF16) or float (DT = LAB_F32, the tf32 network), layouts as
// nhwc_layers_params.cuh says and element access as nn/nhwc_element.cuh.
//
// Every kernel gives one thread a pixel's group of 8 channels (one 16-byte vector in 16 bits, two in float; a
// partial last group, channels % 8, is read and written element by element so nothing past the slice is
// touched); block nn::kThreads, a 1-D grid over pixels x groups. Arithmetic in float, results rounded to
// nearest even once on a 16-bit store; nothing is saved for a backward pass. One variant each (v1_vec8).
//   nhwc_pack_input<DT>: float [B, 3, H*W] planes -> 8 channels a pixel (R, G, B, 5 zeros), the stem's input.
//   nhwc_depthwise3x3<DT>: depthwise 3x3, stride 1, zero padding 1, + bias, optional SiLU, optional residual
//     added after it (DWConv, the PSA `pe` conv); float weights tap-major [9][C rounded up to 8], so a
//     group's weights of a tap are two 16-byte loads (a warp's loads of one tap: 256 contiguous bytes).
//   nhwc_maxpool<DT>: max over a K x K window (K odd, stride 1, -inf padding: SPPF's pools); a NaN in the
//     window gives NaN, as in PyTorch.
//   nhwc_upsample2x<DT>: nearest x2, output pixel (y, x) is input (y / 2, x / 2); bits copied.
//   nhwc_copy<DT>: a channel slice copied into another (a Concat input feeding two concats); bits copied.
//   nhwc_to_planes<DT>: -> float planes [B, C, A] at anchor offset `first` (the detect head's raw outputs);
//     a thread takes one group of one pixel with pixels fastest, so a warp's float stores are contiguous.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_grid_dependency.cuh"
#include "nn/nn_common.cuh"
#include "nn/nhwc_element.cuh"
#include "nn/nhwc_layers_params.cuh"

namespace nhwc {

// Programmatic Dependent Launch, after a thread's bounds check: its loads and stores come after the previous
// launch's completion, and the next launch may start at once (each kernel here is one short pass, so the
// earliest trigger hides the most of the next one's launch).
__device__ __forceinline__ void after_predecessor() {
  lab_grid_dependency_wait();
  lab_launch_dependents();
}

// The thread's index in the 1-D grid.
__device__ __forceinline__ long long thread_index() {
  return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

// One thread's item of a grid over [pixels][groups of 8 channels]: its pixel, its first channel c0 and the
// n <= 8 channels there (the last group may be short).
struct ChannelGroup {
  int groups;
  long long pixel;
  int c0, n;
};

// The thread's item; false (the thread has nothing to do) past pixels * groups. A thread with an item waits
// for its predecessor grid first.
__device__ __forceinline__ bool channel_group(long long pixels, int channels, ChannelGroup& item) {
  item.groups = (channels + 7) / 8;
  const long long index = thread_index();
  if (index >= pixels * item.groups) return false;
  after_predecessor();
  item.pixel = index / item.groups;
  item.c0 = int(index % item.groups) * 8;
  item.n = min(8, channels - item.c0);
  return true;
}

// Channels c0.. of one pixel to float: `n` of them (8: nhwc_load8's vector loads); v[n..7] = 0.
template <int DT>
__device__ __forceinline__ void load8(const nn::nhwc_t<DT>* p, int n, float (&v)[8]) {
  if (n == 8) return nn::nhwc_load8<DT>(p, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = i < n ? nn::nhwc_load1<DT>(p + i) : 0.0f;
}

// v[0..n) stored as DT into channels c0.. of one pixel (8: nhwc_store8's vector stores).
template <int DT>
__device__ __forceinline__ void store8(nn::nhwc_t<DT>* p, int n, const float (&v)[8]) {
  if (n == 8) return nn::nhwc_store8<DT>(p, v);
  for (int i = 0; i < n; ++i) nn::nhwc_store1<DT>(p + i, v[i]);
}

// Eight floats from p (16-byte aligned), two 16-byte loads.
__device__ __forceinline__ void load8f(const float* p, float (&v)[8]) {
  const float4 lo = *reinterpret_cast<const float4*>(p), hi = *reinterpret_cast<const float4*>(p + 4);
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}

// Channels c0.. of one pixel copied bit for bit: `n` of them (8: one 16-byte move in 16 bits, two in float).
template <int DT>
__device__ __forceinline__ void copy8(const nn::nhwc_t<DT>* from, nn::nhwc_t<DT>* to, int n) {
  if (n == 8) {
    constexpr int kVectors = sizeof(nn::nhwc_t<DT>) / 2;
#pragma unroll
    for (int i = 0; i < kVectors; ++i)
      reinterpret_cast<uint4*>(to)[i] = reinterpret_cast<const uint4*>(from)[i];
    return;
  }
  for (int i = 0; i < n; ++i) to[i] = from[i];
}

// A view's element pointer in the kernel's element type.
template <int DT>
__device__ __forceinline__ const nn::nhwc_t<DT>* source(const lab::NhwcSource& v) {
  return static_cast<const nn::nhwc_t<DT>*>(v.data);
}
template <int DT>
__device__ __forceinline__ nn::nhwc_t<DT>* target(const lab::NhwcTarget& v) {
  return static_cast<nn::nhwc_t<DT>*>(v.data);
}

}  // namespace nhwc

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_pack_input(const lab::NhwcPackInputParams p) {
  const long long pixel = nhwc::thread_index();
  if (pixel >= (long long)p.batch * p.plane) return;
  nhwc::after_predecessor();
  const long long b = pixel / p.plane, i = pixel % p.plane;
  const float* rgb = p.in + b * 3 * p.plane + i;
  const float v[8] = {rgb[0], rgb[p.plane], rgb[2 * (long long)p.plane], 0.f, 0.f, 0.f, 0.f, 0.f};
  nhwc::store8<DT>(nhwc::target<DT>(p.out) + pixel * p.out.pitch, 8, v);
}

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_depthwise3x3(const lab::NhwcDepthwiseParams p) {
  nhwc::ChannelGroup item;
  if (!nhwc::channel_group((long long)p.batch * p.h * p.w, p.channels, item)) return;
  const long long pixel = item.pixel;
  const int groups = item.groups, c0 = item.c0, n = item.n;
  const int x = int(pixel % p.w), y = int(pixel / p.w % p.h);
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int ky = 0; ky < 3; ++ky) {
    const int sy = y + ky - 1;
    if (sy < 0 || sy >= p.h) continue;
    for (int kx = 0; kx < 3; ++kx) {
      const int sx = x + kx - 1;
      if (sx < 0 || sx >= p.w) continue;
      float v[8], wt[8];
      nhwc::load8<DT>(
          nhwc::source<DT>(p.in) + (pixel + (ky - 1) * (long long)p.w + (kx - 1)) * p.in.pitch + c0, n, v);
      nhwc::load8f(p.weight + (ky * 3 + kx) * groups * 8 + c0, wt);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += v[i] * wt[i];
    }
  }
  float res[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (p.residual.data) nhwc::load8<DT>(nhwc::source<DT>(p.residual) + pixel * p.residual.pitch + c0, n, res);
  float bias[8], out[8];
  nhwc::load8f(p.bias + c0, bias);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = nn::bias_act(acc[i], bias[i], p.silu) + res[i];
  nhwc::store8<DT>(nhwc::target<DT>(p.out) + pixel * p.out.pitch + c0, n, out);
}

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_maxpool(const lab::NhwcMaxPoolParams p) {
  nhwc::ChannelGroup item;
  if (!nhwc::channel_group((long long)p.batch * p.h * p.w, p.channels, item)) return;
  const long long pixel = item.pixel;
  const int c0 = item.c0, n = item.n, r = p.kernel / 2;
  const int x = int(pixel % p.w), y = int(pixel / p.w % p.h);
  float best[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) best[i] = __uint_as_float(0xff800000u);  // -inf
  for (int sy = max(y - r, 0); sy <= min(y + r, p.h - 1); ++sy)
    for (int sx = max(x - r, 0); sx <= min(x + r, p.w - 1); ++sx) {
      float v[8];
      nhwc::load8<DT>(
          nhwc::source<DT>(p.in) + (pixel + (sy - y) * (long long)p.w + (sx - x)) * p.in.pitch + c0, n, v);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (v[i] > best[i] || v[i] != v[i]) best[i] = v[i];  // a NaN in the window stays (PyTorch)
    }
  nhwc::store8<DT>(nhwc::target<DT>(p.out) + pixel * p.out.pitch + c0, n, best);
}

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_upsample2x(const lab::NhwcUpsampleParams p) {
  const int wo = 2 * p.w_in, ho = 2 * p.h_in;
  nhwc::ChannelGroup item;
  if (!nhwc::channel_group((long long)p.batch * ho * wo, p.channels, item)) return;
  const long long pixel = item.pixel;
  const int c0 = item.c0, n = item.n;
  const int x = int(pixel % wo), y = int(pixel / wo % ho);
  const long long b = pixel / wo / ho, source = (b * p.h_in + y / 2) * p.w_in + x / 2;
  nhwc::copy8<DT>(nhwc::source<DT>(p.in) + source * p.in.pitch + c0,
                  nhwc::target<DT>(p.out) + pixel * p.out.pitch + c0, n);
}

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_copy(const lab::NhwcCopyParams p) {
  nhwc::ChannelGroup item;
  if (!nhwc::channel_group(p.pixels, p.channels, item)) return;
  nhwc::copy8<DT>(nhwc::source<DT>(p.in) + item.pixel * p.in.pitch + item.c0,
                  nhwc::target<DT>(p.out) + item.pixel * p.out.pitch + item.c0, item.n);
}

template <int DT>
__global__ void __launch_bounds__(nn::kThreads) nhwc_to_planes(const lab::NhwcToPlanesParams p) {
  const int groups = (p.channels + 7) / 8;
  const long long index = nhwc::thread_index();
  if (index >= (long long)p.batch * groups * p.pixels) return;
  nhwc::after_predecessor();
  const int i = int(index % p.pixels), g = int(index / p.pixels % groups);
  const long long b = index / p.pixels / groups;
  const int c0 = g * 8, n = min(8, p.channels - c0);
  float v[8];
  nhwc::load8<DT>(nhwc::source<DT>(p.in) + (b * p.pixels + i) * p.in.pitch + c0, n, v);
  float* out = p.out + (b * p.channels + c0) * p.anchors + p.first + i;
  for (int k = 0; k < n; ++k) out[k * (long long)p.anchors] = v[k];
}
