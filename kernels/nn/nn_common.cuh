// Device helpers shared by the nn kernels: the fused conv epilogue (bias, SiLU, residual, and the
// pre-activation the training forward keeps) and the grid conventions. Activations are [B, C, H, W] with
// contiguous H*W planes addressed by a batch stride and a channel stride in elements
// (kernels/nn/plane_view.hpp): (pointer, batch_stride, channel_stride) views in the kernels' parameter
// structs (nn_params.cuh), triples of scalar arguments in conv2d_mma.
#pragma once
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/nn_params.cuh"

namespace nn {

constexpr int kThreads = 256;  // block size of every one-thread-per-element nn kernel

// act(v): SiLU v * sigmoid(v) written as v / (1 + e^-v) (e^-v = inf gives -0 for very negative v).
__device__ __forceinline__ float act(float v, int silu) {
  return silu ? v / (1.0f + expf(-v)) : v;
}

// act() for the 16-bit-product convs (conv2d_mma): e^-v from the hardware's exp2 and the quotient from its
// reciprocal (__expf, __fdividef: relative error about 1e-6, far below the fp16 / bf16 rounding of the
// products; v below -87 still gives 0) in a third of act()'s instructions, which with per-element stores had
// made conv2d_mma's 1x1 instances issue-bound.
__device__ __forceinline__ float act_fast(float v, int silu) {
  return silu ? __fdividef(v, 1.0f + __expf(-v)) : v;
}

// act(acc + bias).
__device__ __forceinline__ float bias_act(float acc, float bias, int silu) {
  return act(acc + bias, silu);
}

// Two floats rounded to the 16-bit type `type` (LAB_F16 / LAB_BF16) and packed, `lo` in bits 0-15.
__device__ __forceinline__ uint32_t pack2_as(int type, float lo, float hi) {
  return type == LAB_F16 ? lab_pack2<LAB_F16>(lo, hi) : lab_pack2<LAB_BF16>(lo, hi);
}

// One channel's plane of a pre-activation output (lab::PreOut): floats, or 16-bit values of `type`.
struct PreRow {
  void* row;  // null: no pre-activation output
  int type;

  __device__ __forceinline__ void put(long long i, float z) const {
    if (type == lab::kPreFloat)
      static_cast<float*>(row)[i] = z;
    else
      static_cast<uint16_t*>(row)[i] = uint16_t(pack2_as(type, z, 0.0f));
  }
  // Pixels p and p + 1 as one access (p even, the row aligned to the pair).
  __device__ __forceinline__ void put_pair(int p, float z0, float z1) const {
    if (type == lab::kPreFloat)
      *reinterpret_cast<float2*>(static_cast<float*>(row) + p) = make_float2(z0, z1);
    else
      *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(row) + p) = pack2_as(type, z0, z1);
  }
};

// Channel c of image b of `pre`; a null row when pre has no data.
__device__ __forceinline__ PreRow pre_row_of(const lab::PreOut& pre, long long b, long long c) {
  const long long offset = b * pre.batch_stride + c * pre.channel_stride;
  if (!pre.data) return {nullptr, pre.type};
  return {pre.type == lab::kPreFloat ? static_cast<void*>(static_cast<float*>(pre.data) + offset)
                                     : static_cast<void*>(static_cast<uint16_t*>(pre.data) + offset),
          pre.type};
}

// Element i of a pre-activation written as `type` (PreRow), as float (exact).
__device__ __forceinline__ float load_pre(const void* data, int type, long long i) {
  if (type == lab::kPreFloat) return static_cast<const float*>(data)[i];
  const uint16_t bits = static_cast<const uint16_t*>(data)[i];
  return type == LAB_F16 ? lab_to_float<LAB_F16>(bits) : lab_to_float<LAB_BF16>(bits);
}

// The conv epilogue at pixel p of one channel's planes (res_row and pre.row may be null): z = acc + bias;
// out_row[p] = act(z) (act_fast with kFast) (+ res_row[p]), and pre's p = z (the pre-activation the SiLU
// backward needs). For kernels that find a channel's rows once (conv2d_mma, conv2d_depthwise).
template <bool kFast>
__device__ __forceinline__ void store_output_at(float acc, float bias, int silu, const float* res_row,
                                                PreRow pre, float* out_row, int p) {
  const float z = acc + bias;
  float v = kFast ? act_fast(z, silu) : act(z, silu);
  if (res_row) v += res_row[p];
  out_row[p] = v;
  if (pre.row) pre.put(p, z);
}

// The same at pixels p and p + 1 as one access per plane (p even, every row aligned to 8 bytes).
template <bool kFast>
__device__ __forceinline__ void store_output_pair(float acc0, float acc1, float bias, int silu,
                                                  const float* res_row, PreRow pre, float* out_row, int p) {
  const float2 z = make_float2(acc0 + bias, acc1 + bias);
  float2 v = kFast ? make_float2(act_fast(z.x, silu), act_fast(z.y, silu))
                   : make_float2(act(z.x, silu), act(z.y, silu));
  if (res_row) {
    const float2 r = *reinterpret_cast<const float2*>(res_row + p);
    v.x += r.x, v.y += r.y;
  }
  *reinterpret_cast<float2*>(out_row + p) = v;
  if (pre.row) pre.put_pair(p, z.x, z.y);
}

// The conv epilogue at (b, c, p) of views (pointer, batch stride, channel stride): z = acc + bias;
// out[b, c, p] = act(z) (+ residual[b, c, p] when residual is not null), and pre's (b, c, p) = z when pre has
// data (the pre-activation the SiLU backward needs). store_output_at's steps on element indices: through
// channel-row pointers conv2d_tiled<1, 16> spilled.
__device__ __forceinline__ void store_output(float acc, float bias, int silu, const float* residual,
                                             long long res_bs, long long res_cs, const lab::PreOut& pre,
                                             float* out, long long out_bs, long long out_cs, int b, int c,
                                             int p) {
  const float z = acc + bias;
  float v = act(z, silu);
  if (residual) v += residual[b * res_bs + c * res_cs + p];
  out[b * out_bs + c * out_cs + p] = v;
  if (pre.data)  // after out: fewer registers in conv2d_tiled's epilogue
    PreRow{pre.data, pre.type}.put(b * pre.batch_stride + c * pre.channel_stride + p, z);
}

}  // namespace nn
