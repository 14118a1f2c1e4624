// Pieces shared by the attention runners (flash_attn2_runners.cpp, flash_attn2_half_runners.cpp): the common
// parameters, the resolved problem and its sizes, the seeded inputs, and output poisoning.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/runner.hpp"

namespace lab {

// BH, N_CTX_Q, N_CTX_K, the runner's own HEAD_DIM spec, then SCALE.
std::vector<ParamSpec> attention_param_specs(const ParamSpec& head_dim);

// The problem of BH, N_CTX_Q, N_CTX_K, HEAD_DIM and SCALE (0: 1/sqrt(HEAD_DIM)), the scale rounded to float
// as the kernels receive it.
struct AttentionSize {
  AttentionShape shape;

  explicit AttentionSize(const Params& p);
  AttentionProblem problem() const { return {shape.batch_heads, shape.n_q, shape.n_k, float(shape.scale)}; }
  size_t q_elems() const { return size_t(shape.batch_heads) * shape.n_q * shape.head_dim; }
  size_t k_elems() const { return size_t(shape.batch_heads) * shape.n_k * shape.head_dim; }
  size_t rows() const { return size_t(shape.batch_heads) * shape.n_q; }
  std::vector<size_t> q_dims() const;    // [BH, Nq, D]: Q, O, dO, dQ
  std::vector<size_t> k_dims() const;    // [BH, Nk, D]: K, V, dK, dV
  std::vector<size_t> row_dims() const;  // [BH, Nq]: L
  double forward_flops() const {
    return 4.0 * shape.batch_heads * shape.n_q * double(shape.n_k) * shape.head_dim;
  }
};

// Seeded inputs: Q and K uniform in [-2, 2) (scores spread wide enough that the softmax is far from
// uniform), V and dO in [-1, 1); dO only when asked for.
struct AttentionInputs {
  std::vector<float> q, k, v, d_o;
};
AttentionInputs random_attention_inputs(const AttentionSize& size, uint64_t seed, bool with_d_o);

// Whether make_check keeps an output of `elems` elements for the viewer's heatmap.
inline bool keep_for_viewer(size_t elems) {
  return elems <= (size_t(1) << 20);
}

// Fills every buffer with 0xff bytes: NaN in float32, fp16 and bf16 alike.
void poison_all(Backend& b, std::initializer_list<const DeviceBuffer*> buffers);

}  // namespace lab
