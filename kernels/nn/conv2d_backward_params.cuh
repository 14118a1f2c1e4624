// Parameters of the Conv2d backward kernels (conv2d_backward.cu), shared by the kernels and
// Conv2dBackwardOp: plain data, passed by value. Tensors are dense NCHW: x [B, C_in, H, W], dz and dy
// [B, C_out, Ho, Wo], weight [C_out, C_in/groups, K, K] (padding K/2, as the forward); the SiLU backward's dy,
// the weight gradient's x and the input gradient's dx alone may have any image stride (a channel slice of a
// concatenation's gradient or value).
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has none: common/lab_mma.cuh, included first, defines uint16_t there
#endif

namespace lab {

struct Conv2dBackwardSizes {
  int batch, c_in, c_out, h_in, w_in, h_out, w_out, kernel, stride, groups;
};

// conv2d_dgrad_direct (v1) and conv2d_dgrad_tiled<K, TM> (v2): dx from dz and the weights.
struct Conv2dDgradParams {
  const float* grad_z;     // dz [B, C_out, Ho, Wo]
  const float* w;          // v1: [C_out, C_in/groups, K, K]; v2: [C_out*K*K, C_in] (rearranged on the host)
  const uint16_t* w_half;  // v3 / v4 (w null): v2's layout rounded to the products' 16-bit type
  float* grad_in;          // dx [B, C_in, H, W], image b at grad_in + b * grad_in_batch_stride (dense: C_in*H*W)
  long long grad_in_batch_stride;
  int accumulate;          // 1: dx += the gradient (a later contribution, in place), 0: dx = it
  // Null, or the pre-activation z [B, C_in, H, W] of x = SiLU(z) (dense planes, image b at gate +
  // b * gate_batch_stride): dx = silu'(z) * the gradient, the folded SiLU backward of x's conv (never with
  // accumulate: dx is then that conv's dz, which has this one contribution).
  const float* gate;
  long long gate_batch_stride;
  Conv2dBackwardSizes size;
};

// conv2d_wgrad_direct (v1), conv2d_wgrad_tiled<K, TM> (v2), conv2d_wgrad_mma (v3, v4) and
// conv2d_wgrad_depthwise<K> (v5): dW from x and dz.
struct Conv2dWgradParams {
  const float* in;      // x [B, C_in, H, W], its channels dense, image b at in + b * in_batch_stride
  int in_batch_stride;  // (dense: C_in * H * W; 32-bit: a 64-bit one took conv2d_wgrad_mma<0, 3, 16> from
                        // 103 to 128 registers and ~1.6x the time on the H200)
  const float* grad_z;  // dz [B, C_out, Ho, Wo]
  float* grad_w;        // dW [C_out, C_in/groups, K, K]
  float* partial;       // v2-v5 split-K: null, or [splits, C_out, C_in/groups*K*K] (grad_w not written then)
  int split_items;      // v2-v5: reduction items (b, output pixel) per split, a multiple of 32
  // v2-v5: null, or db [C_out] = the sum of dz, summed in the same launch (v1 leaves it to conv2d_bias_grad);
  // with partial, each split's sums go to bias_partial [splits, C_out] instead.
  float* grad_bias;
  float* bias_partial;
  Conv2dBackwardSizes size;
};

// conv2d_wgrad_reduce: grad_w = the splits of partial added in index order, and with grad_bias the same of
// bias_partial.
struct Conv2dWgradReduceParams {
  const float* partial;       // [splits, count]
  float* grad_w;              // [count]
  const float* bias_partial;  // [splits, c_out], with grad_bias
  float* grad_bias;           // null, or [c_out]
  int splits, c_out;
  long long count;
};

// conv2d_bias_grad: db[c] = sum over b and pixels of dz[b, c, :]. Above batch 1 each image's sum goes to
// partial[b, c], and the channel's last CTA to finish (counted in arrivals[c], which it resets to 0 for the
// next launch) adds them in image order into grad_bias[c].
struct Conv2dBiasGradParams {
  const float* grad_z;  // dz [B, C_out, plane]
  float* grad_bias;     // [C_out]
  float* partial;       // null (one image group), or [groups, C_out] per-group sums
  unsigned* arrivals;   // [C_out] zeros before a launch (and after it), with partial
  int c_out, plane;
  int batch, images;  // the images, and those of a CTA's group (the groups are gridDim.y)
};

// conv2d_silu_bias_backward: dz = dy * silu'(z) elementwise, and db summed from it in the same pass (as
// conv2d_bias_grad: per image group into partial when there are several, then by the channel's last CTA).
struct Conv2dSiluBiasBackwardParams {
  const float* grad_out;            // dy [B, C_out, plane]: the gradient of the layer's output, image b at
  long long grad_out_batch_stride;  // grad_out + b * grad_out_batch_stride (dense: C_out * plane)
  const float* z;                   // the forward's pre-activation conv(x) + bias, dense [B, C_out, plane]
  float* grad_z;                    // dz, dense as z
  float* grad_bias;       // [C_out]
  float* partial;         // null (one image group), or [groups, C_out] per-group sums
  unsigned* arrivals;     // [C_out] zeros before a launch (and after it), with partial
  int c_out, plane;
  int batch, images;  // the images, and those of a CTA's group (the groups are gridDim.y)
};

}  // namespace lab
