// Common parameters, problem sizes and seeded inputs of the attention runners.
#include "kernels/attention/attention_runner_support.hpp"

#include <cmath>

namespace lab {

std::vector<ParamSpec> attention_param_specs(const ParamSpec& head_dim) {
  using K = ParamSpec::Kind;
  return {{"BH", K::Int, "2", "batch * heads", 1, 65536},
          {"N_CTX_Q", K::Int, "400", "query rows per head", 1, 1 << 20},
          {"N_CTX_K", K::Int, "400", "key / value rows per head", 1, 1 << 20},
          head_dim,
          {"SCALE", K::Float, "0", "softmax scale; 0 means 1/sqrt(HEAD_DIM)", 0, 1e6}};
}

ParamSpec forward_outputs_param() {
  ParamSpec ol{
      "OL", ParamSpec::Kind::Choice, "kernel",
      "O and L fed to the backward: the forward kernel's (kernel) or the float64 reference's (reference)"};
  ol.choices = {"kernel", "reference"};
  return ol;
}

ParamSpec exp2_fma_param(const std::string& which) {
  ParamSpec exp2{"EXP2_FMA", ParamSpec::Kind::Int, "0",
                 which + ": of every 8 softmax exponentials, how many run as an FMA polynomial instead of "
                         "ex2.approx (0 to 8)"};
  exp2.choices = {"0", "1", "2", "3", "4", "5", "6", "7", "8"};
  return exp2;
}

AttentionSize::AttentionSize(const Params& p) {
  shape.batch_heads = int(param_int(p, "BH"));
  shape.n_q = int(param_int(p, "N_CTX_Q"));
  shape.n_k = int(param_int(p, "N_CTX_K"));
  shape.head_dim = int(param_int(p, "HEAD_DIM"));
  const double scale = param_float(p, "SCALE");
  shape.scale = double(float(scale != 0 ? scale : 1.0 / std::sqrt(double(shape.head_dim))));
}

AttentionInputs random_attention_inputs(const AttentionSize& size, uint64_t seed, bool with_d_o) {
  constexpr float kQkRange = 2.0f;
  AttentionInputs in;
  in.q = random_uniform(size.q_elems(), -kQkRange, kQkRange, derive_seed(seed, "q"));
  in.k = random_uniform(size.k_elems(), -kQkRange, kQkRange, derive_seed(seed, "k"));
  in.v = random_uniform(size.k_elems(), -1.f, 1.f, derive_seed(seed, "v"));
  if (with_d_o) in.d_o = random_uniform(size.q_elems(), -1.f, 1.f, derive_seed(seed, "dO"));
  return in;
}

}  // namespace lab
