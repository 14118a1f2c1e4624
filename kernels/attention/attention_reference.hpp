// CPU references of attention in float64, written independently of the kernels: forward (O and the
// logsumexp L, explicit softmax over each full row of scores), the analytic backward (dQ, dK, dV) and the
// attention-probabilities op. Layouts as in flash_attn2.cu: Q/O [BH, Nq, D], K/V [BH, Nk, D], L [BH, Nq].
#pragma once
#include <vector>

namespace lab {

struct AttentionShape {
  int batch_heads = 1;
  int n_q = 1;
  int n_k = 1;
  int head_dim = 16;
  double scale = 0.25;
};

struct AttentionForwardRef {
  std::vector<double> o;    // [BH, Nq, D]
  std::vector<double> lse;  // [BH, Nq], natural log of sum_j exp(scale q_i . k_j)
};

struct AttentionGradsRef {
  std::vector<double> dq, dk, dv;
};

// Heads are spread over std::thread workers (problems of a few hundred GFLOP are checked on the host).
AttentionForwardRef attention_forward_reference(const std::vector<double>& q, const std::vector<double>& k,
                                                const std::vector<double>& v, const AttentionShape& s);
// Gradients of sum(O * d_o) with respect to Q, K and V.
AttentionGradsRef attention_backward_reference(const std::vector<double>& q, const std::vector<double>& k,
                                               const std::vector<double>& v, const std::vector<double>& d_o,
                                               const AttentionShape& s);
// P[r, j] = softmax_j(scale q_{rows[r]} . k_j) of head `bh`: [rows.size(), Nk].
std::vector<double> attention_probs_reference(const std::vector<double>& q, const std::vector<double>& k,
                                              const AttentionShape& s, int bh, const std::vector<int>& rows);

std::vector<double> to_double(const std::vector<float>& v);
std::vector<float> to_float(const std::vector<double>& v);

}  // namespace lab
