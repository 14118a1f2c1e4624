// The frozen BatchNorm between a training step's checkpoint parameters and the folded convolutions the
// forward runs, over a table of convs (batchnorm_fold_params.cuh), deterministic (no atomics, fixed-order
// sums in float64):
//   batchnorm_fold           grid = the table's output channels, block = kFoldThreads: w' and b' of one
//   output
//                            channel, written in every target layout (the forward op's, the input-gradient
//                            op's; float32 or the 16-bit operands of v5 / v6), after each optimizer step.
//   batchnorm_fold_backward  same grid: the chain rule of one output channel from d w' and d b' (unscaled by
//                            the fp16 loss scale), added to the checkpoint gradients, after each backward.
//   conv_grad_norms          grid = the convs: the L2 norm of one conv's checkpoint gradients.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_block_sum.cuh"
#include "train/batchnorm_fold_params.cuh"

// The conv whose output channels hold block `b`: the last entry with first_channel <= b.
__device__ __forceinline__ int fold_conv_of_block(const lab::FoldConv* convs, int n_convs, int b) {
  int lo = 0, hi = n_convs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (convs[mid].first_channel <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// gamma / sqrt(var + eps) of output channel o (1 without BatchNorm).
__device__ __forceinline__ double fold_factor(const lab::FoldConv& c, int o) {
  return c.gamma ? double(c.gamma[o]) / sqrt(double(c.var[o]) + c.eps) : 1.0;
}

__global__ void __launch_bounds__(lab::kFoldThreads) batchnorm_fold(const lab::BatchnormFoldParams p) {
  const int block = int(blockIdx.x);
  const lab::FoldConv c = p.convs[fold_conv_of_block(p.convs, p.n_convs, block)];
  const int o = block - c.first_channel;
  const double factor = fold_factor(c, o);
  const int per_out = c.inputs * c.taps;
  for (int j = int(threadIdx.x); j < per_out; j += lab::kFoldThreads) {
    const float w = float(double(c.weight[(long long)o * per_out + j]) * factor);
    const int i = j / c.taps, t = j % c.taps;
    for (int k = 0; k < lab::kFoldTargets; ++k) {
      const lab::FoldTarget& target = c.folded[k];
      if (!target.data) continue;
      const long long at = o * target.out_stride + i * target.in_stride + t * target.tap_stride;
      if (target.element == lab::kFoldFloat32)
        static_cast<float*>(target.data)[at] = w;
      else  // the float32 w' rounded to 16 bits (nearest even), as Conv2dOp uploads v5 / v6 weights
        static_cast<uint16_t*>(target.data)[at] = uint16_t(
            target.element == lab::kFoldF16 ? lab_pack2<LAB_F16>(w, 0.0f) : lab_pack2<LAB_BF16>(w, 0.0f));
    }
  }
  if (threadIdx.x == 0)
    c.folded_bias[o] = c.gamma ? float(double(c.beta[o]) - double(c.mean[o]) * factor) : c.beta[o];
}

__global__ void __launch_bounds__(lab::kFoldThreads)
    batchnorm_fold_backward(const lab::BatchnormFoldParams p) {
  const int block = int(blockIdx.x);
  const lab::FoldConv c = p.convs[fold_conv_of_block(p.convs, p.n_convs, block)];
  const int o = block - c.first_channel;
  const long long row = (long long)o * c.inputs * c.taps;
  const int per_out = c.inputs * c.taps;
  const double factor = fold_factor(c, o);
  double through_weight = 0.0;
  for (int j = int(threadIdx.x); j < per_out; j += lab::kFoldThreads) {
    const double g = double(c.d_folded_weight[row + j]) * p.unscale;
    c.d_weight[row + j] += float(g * factor);
    through_weight += g * double(c.weight[row + j]);
  }
  if (!c.gamma) {
    if (threadIdx.x == 0) c.d_beta[o] += float(double(c.d_folded_bias[o]) * p.unscale);
    return;
  }
  const double total = lab_block_sum<lab::kFoldThreads>(through_weight);
  if (threadIdx.x == 0) {
    const double s = sqrt(double(c.var[o]) + c.eps);
    const double d_bias = double(c.d_folded_bias[o]) * p.unscale;
    c.d_gamma[o] += float((total - d_bias * double(c.mean[o])) / s);
    c.d_beta[o] += float(d_bias);
  }
}

__global__ void __launch_bounds__(lab::kFoldThreads) conv_grad_norms(const lab::ConvGradNormsParams p) {
  const lab::FoldConv c = p.convs[blockIdx.x];
  const long long weights = (long long)c.c_out * c.inputs * c.taps;
  double sum = 0.0;
  for (long long j = threadIdx.x; j < weights; j += lab::kFoldThreads)
    sum += double(c.d_weight[j]) * c.d_weight[j];
  for (int o = int(threadIdx.x); o < c.c_out; o += lab::kFoldThreads) {
    sum += double(c.d_beta[o]) * c.d_beta[o];
    if (c.gamma) sum += double(c.d_gamma[o]) * c.d_gamma[o];
  }
  const double total = lab_block_sum<lab::kFoldThreads>(sum);
  if (threadIdx.x == 0) p.norms[blockIdx.x] = sqrt(total);
}
