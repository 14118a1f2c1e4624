// Parameters of the BatchNorm fold kernels (batchnorm_fold.cu), shared by the kernels and the host that
// launches them: plain data, passed by value. Every launch runs over a table of FoldConv in device memory,
// one block per output channel of every conv of the table (block b works on the conv whose
// [first_channel, first_channel + c_out) holds b, found by binary search).
#pragma once

namespace lab {

constexpr int kFoldThreads = 128;  // threads per block of every fold kernel
constexpr int kFoldTargets = 2;    // layouts one fold writes (a conv's forward op and its input-gradient op)

// The element type of a fold target: float32, or the 16-bit operands of the tensor-core convs (rounded to
// nearest even once, from the float64 product).
enum FoldElement : int { kFoldFloat32 = 0, kFoldF16 = 1, kFoldBf16 = 2 };

// Where a folded weight goes: element (o, i, t) of [c_out, inputs, taps] at
// data[o * out_stride + i * in_stride + t * tap_stride], of type `element`. data null: no target.
struct FoldTarget {
  void* data;
  long long out_stride, in_stride, tap_stride;
  int element;  // FoldElement (kFoldFloat32 when left out of an initializer)
};

// One conv: its checkpoint parameters, where its folded weight and bias go, and where the chain rule reads
// the folded gradients and adds the checkpoint gradients. With gamma null the conv has no BatchNorm: beta is
// its bias, the fold a copy and the chain rule the identity. inputs 0: no weights (weight, folded targets,
// d_folded_weight and d_weight unused), only the per-channel beta: copied to folded_bias, d_folded_bias added
// to d_beta.
struct FoldConv {
  const float* weight;  // [c_out, inputs, taps] conv.weight (a plain conv's weight)
  const float* gamma;   // [c_out] bn.weight, or null
  const float* beta;    // [c_out] bn.bias (a plain conv's bias)
  const float* mean;    // [c_out] bn.running_mean (unused without gamma)
  const float* var;     // [c_out] bn.running_var (unused without gamma)
  double eps;
  int c_out, inputs, taps;          // inputs = c_in / groups, taps = kernel * kernel
  int first_channel;                // this conv's first block of a launch
  FoldTarget folded[kFoldTargets];  // batchnorm_fold writes w' here
  float* folded_bias;               // [c_out] batchnorm_fold writes b' here
  const float* d_folded_weight;     // [c_out, inputs, taps] d loss / d w'
  const float* d_folded_bias;       // [c_out] d loss / d b'
  float* d_weight;                  // [c_out, inputs, taps] += d loss / d conv.weight
  float* d_gamma;                   // [c_out] += d loss / d bn.weight (unused without gamma)
  float* d_beta;                    // [c_out] += d loss / d bn.bias (a plain conv's bias)
};

// batchnorm_fold: w' = w * gamma / sqrt(var + eps), b' = beta - mean * gamma / sqrt(var + eps), in float64
// rounded once (as the host's fold_batchnorm).
// batchnorm_fold_backward: the chain rule, added to the checkpoint gradients (s = sqrt(var + eps)):
// d w += g' * gamma / s; d gamma += (sum_i g'[o, i] * w[o, i] - d' * mean) / s; d beta += d', where g' and
// d' are the folded gradients times `unscale` (1 / the fp16 loss scale, a power of two: exact; 1 without).
struct BatchnormFoldParams {
  const FoldConv* convs;  // [n_convs]
  int n_convs;
  double unscale;  // batchnorm_fold_backward only
};

// conv_grad_norms: norms[c] = the L2 norm of conv c's checkpoint gradients (d_weight, d_gamma, d_beta), one
// block per conv.
struct ConvGradNormsParams {
  const FoldConv* convs;  // [n_convs]
  int n_convs;
  double* norms;  // [n_convs]
};

}  // namespace lab
