// clip_grad_norm: torch.nn.utils.clip_grad_norm_(parameters, max_norm) over a list of float32 gradients, in
// three launches (deterministic: no atomics, every sum in a fixed order).
//   clip_grad_norm_partials  grid = the table's total blocks, block = kOptimThreads: each thread sums the
//                            squares of its strided elements in float64, the block reduces them in shared
//                            memory by a fixed tree and writes partials[block].
//   clip_grad_norm_finish    one block: the partials summed the same way, total = sqrt(sum), scale =
//                            max_norm / (total + 1e-6) clamped to 1; writes total (float) and scale.
//   clip_grad_norm_apply     grid as pass 1: grad = grad_in * scale (a multiplication by 1 when not clipped,
//                            as torch does).
// float64 partials: a float32 sum in this fixed order would be deterministic too, but its error (up to
// ~log2(n) roundings of 2^-24 here, more for the long per-thread runs of a smaller grid) depends on the
// order; in float64 the norm is exact to its final float32 rounding whatever the order, and the wider adds
// cost nothing in a pass bound by reading the gradients.
#include "common/lab_block_sum.cuh"
#include "optim/optim_common.cuh"

__global__ void clip_grad_norm_partials(const lab::ClipPartialsParams p) {
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  long long begin, end;
  optim_block_range(t, block, begin, end);
  double sum = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) {
    const double g = t.grad_in[i];
    sum += g * g;
  }
  const double total = lab_block_sum<lab::kOptimThreads>(sum);
  if (threadIdx.x == 0) p.partials[block] = total;
}

__global__ void clip_grad_norm_finish(const lab::ClipFinishParams p) {
  double sum = 0.0;
  for (int i = int(threadIdx.x); i < p.n_partials; i += lab::kOptimThreads) sum += p.partials[i];
  const double total = lab_block_sum<lab::kOptimThreads>(sum);
  if (threadIdx.x == 0) {
    const double norm = sqrt(total);
    const double coef = double(p.max_norm) / (norm + 1e-6);
    *p.total_norm = float(norm);
    *p.scale = coef < 1.0 ? float(coef) : 1.0f;
  }
}

__global__ void clip_grad_norm_apply(const lab::ClipApplyParams p) {
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  long long begin, end;
  optim_block_range(t, block, begin, end);
  const float scale = *p.scale;
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) t.grad[i] = t.grad_in[i] * scale;
}
