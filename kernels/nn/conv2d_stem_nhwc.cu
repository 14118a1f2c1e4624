// conv2d_stem_nhwc: the network's first layer, 3 -> C_OUT channels, 3x3 stride 2 padding 1, as a direct
// convolution in float32 FMAs: it reads the float NCHW input [N, 3, H, W] and writes NHWC activations (fp16 /
// bf16, or float for the tf32 network) with the folded-BN bias and SiLU, so the NHWC network starts without a
// padded copy of its input.
//
// One thread per output pixel m = (n, oy, ox), consecutive threads on consecutive ox: the 27 input values of
// a pixel are read straight from global memory (a warp's loads of one tap cover 64 consecutive floats of one
// input row, the neighbouring taps hit the same lines in L1); padding taps are skipped. The weights, stored
// in shared memory tap-major ([27][C_OUT]), are read by every thread at the same address (a broadcast), four
// channels per load. The C_OUT float accumulators start at zero; then act(acc + bias) is rounded to the
// element type and stored 8 channels at a time (nhwc_store8: 16 bytes in 16 bits, 32 in float) into
// out[m * out_pitch ..].
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_grid_dependency.cuh"
#include "nn/nn_common.cuh"
#include "nn/nhwc_element.cuh"
#include "nn/conv2d_stem_nhwc_params.cuh"

// DT: LAB_F16, LAB_BF16 or LAB_F32; C_OUT a multiple of 8 up to 64. Block lab::kConv2dStemThreads, grid
// ceil(m / lab::kConv2dStemThreads).
template <int DT, int C_OUT>
__global__ void __launch_bounds__(lab::kConv2dStemThreads)
    conv2d_stem_nhwc(const lab::Conv2dStemNhwcParams p) {
  static_assert(C_OUT % 8 == 0 && C_OUT <= 64, "C_OUT: 16-byte groups of 8 channels, at most 64");
  constexpr int kTaps = 27;  // 3 input channels x 3 x 3
  __shared__ float4 weight[kTaps * C_OUT / 4];
  const int tid = threadIdx.x;
  for (int i = tid; i < kTaps * C_OUT; i += blockDim.x) {  // [co][tap] -> [tap][co]
    const int co = i % C_OUT, tap = i / C_OUT;
    reinterpret_cast<float*>(weight)[i] = p.weight[co * kTaps + tap];
  }
  __syncthreads();
  // Programmatic Dependent Launch: the weights (uploaded once, written by no kernel) are staged while the
  // previous launch finishes; the input planes are read and the output written after its completion.
  lab_grid_dependency_wait();
  lab_launch_dependents();

  const int m = blockIdx.x * blockDim.x + tid;
  if (m >= p.m) return;
  const int ox = m % p.wo, oy = m / p.wo % p.ho, n = m / p.wo / p.ho;
  float acc[C_OUT];
#pragma unroll
  for (int co = 0; co < C_OUT; ++co) acc[co] = 0.f;
#pragma unroll
  for (int ci = 0; ci < 3; ++ci) {
    const float* plane = p.in + size_t(n * 3 + ci) * p.h * p.w;
#pragma unroll
    for (int ky = 0; ky < 3; ++ky) {
      const int iy = 2 * oy - 1 + ky;
      if (iy < 0 || iy >= p.h) continue;
#pragma unroll
      for (int kx = 0; kx < 3; ++kx) {
        const int ix = 2 * ox - 1 + kx;
        if (ix < 0 || ix >= p.w) continue;
        const float v = plane[size_t(iy) * p.w + ix];
        const float4* wt = weight + (ci * 9 + ky * 3 + kx) * C_OUT / 4;
#pragma unroll
        for (int c4 = 0; c4 < C_OUT / 4; ++c4) {
          const float4 wv = wt[c4];
          acc[4 * c4] = fmaf(v, wv.x, acc[4 * c4]);
          acc[4 * c4 + 1] = fmaf(v, wv.y, acc[4 * c4 + 1]);
          acc[4 * c4 + 2] = fmaf(v, wv.z, acc[4 * c4 + 2]);
          acc[4 * c4 + 3] = fmaf(v, wv.w, acc[4 * c4 + 3]);
        }
      }
    }
  }

  nn::nhwc_t<DT>* out = static_cast<nn::nhwc_t<DT>*>(p.out) + size_t(m) * p.out_pitch;
#pragma unroll
  for (int c8 = 0; c8 < C_OUT / 8; ++c8) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = nn::bias_act(acc[8 * c8 + i], p.bias[8 * c8 + i], p.silu);
    nn::nhwc_store8<DT>(out + 8 * c8, v);
  }
}
