// Float64 attention references: one row of scores at a time, explicit max-subtracted softmax, then the
// textbook gradient formulas dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(P * dP)), dQ = s dS K, dK = s
// dS^T Q.
#include "kernels/attention/attention_reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

namespace lab {
namespace {

double dot(const double* a, const double* b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // four chains: the loop is latency bound otherwise
  int d = 0;
  for (; d + 4 <= n; d += 4)
    s0 += a[d] * b[d], s1 += a[d + 1] * b[d + 1], s2 += a[d + 2] * b[d + 2], s3 += a[d + 3] * b[d + 3];
  for (; d < n; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

// Runs body(bh) for every head on up to hardware_concurrency threads.
void for_each_head(int heads, const std::function<void(int)>& body) {
  const int workers = std::max(1, std::min<int>(heads, int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int bh = w; bh < heads; bh += workers) body(bh);
    });
  for (auto& t : pool) t.join();
}

// Softmax row i of head bh into p (length Nk); returns the logsumexp.
double softmax_row(const double* q_row, const double* k_bh, const AttentionShape& s, std::vector<double>& p) {
  double mx = -INFINITY;
  for (int j = 0; j < s.n_k; ++j) {
    p[j] = s.scale * dot(q_row, k_bh + size_t(j) * s.head_dim, s.head_dim);
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (int j = 0; j < s.n_k; ++j) sum += (p[j] = std::exp(p[j] - mx));
  for (int j = 0; j < s.n_k; ++j) p[j] /= sum;
  return mx + std::log(sum);
}

}  // namespace

AttentionForwardRef attention_forward_reference(const std::vector<double>& q, const std::vector<double>& k,
                                                const std::vector<double>& v, const AttentionShape& s) {
  const int D = s.head_dim;
  AttentionForwardRef r;
  r.o.assign(size_t(s.batch_heads) * s.n_q * D, 0.0);
  r.lse.assign(size_t(s.batch_heads) * s.n_q, 0.0);
  for_each_head(s.batch_heads, [&](int bh) {
    std::vector<double> p(s.n_k);
    const double* k_bh = k.data() + size_t(bh) * s.n_k * D;
    const double* v_bh = v.data() + size_t(bh) * s.n_k * D;
    for (int i = 0; i < s.n_q; ++i) {
      const size_t row = size_t(bh) * s.n_q + i;
      r.lse[row] = softmax_row(q.data() + row * D, k_bh, s, p);
      double* o = r.o.data() + row * D;
      for (int j = 0; j < s.n_k; ++j)
        for (int d = 0; d < D; ++d) o[d] += p[j] * v_bh[size_t(j) * D + d];
    }
  });
  return r;
}

AttentionGradsRef attention_backward_reference(const std::vector<double>& q, const std::vector<double>& k,
                                               const std::vector<double>& v, const std::vector<double>& d_o,
                                               const AttentionShape& s) {
  const int D = s.head_dim;
  AttentionGradsRef g;
  g.dq.assign(q.size(), 0.0);
  g.dk.assign(k.size(), 0.0);
  g.dv.assign(v.size(), 0.0);
  for_each_head(s.batch_heads, [&](int bh) {
    std::vector<double> p(s.n_k), dp(s.n_k);
    const size_t kv = size_t(bh) * s.n_k * D;
    for (int i = 0; i < s.n_q; ++i) {
      const size_t row = (size_t(bh) * s.n_q + i) * D;
      softmax_row(q.data() + row, k.data() + kv, s, p);
      double pdp = 0;
      for (int j = 0; j < s.n_k; ++j) {
        dp[j] = dot(d_o.data() + row, v.data() + kv + size_t(j) * D, D);
        pdp += p[j] * dp[j];
      }
      for (int j = 0; j < s.n_k; ++j) {
        const double ds = p[j] * (dp[j] - pdp);
        const size_t kj = kv + size_t(j) * D;
        for (int d = 0; d < D; ++d) {
          g.dv[kj + d] += p[j] * d_o[row + d];
          g.dq[row + d] += s.scale * ds * k[kj + d];
          g.dk[kj + d] += s.scale * ds * q[row + d];
        }
      }
    }
  });
  return g;
}

std::vector<double> attention_probs_reference(const std::vector<double>& q, const std::vector<double>& k,
                                              const AttentionShape& s, int bh, const std::vector<int>& rows) {
  std::vector<double> out(rows.size() * size_t(s.n_k)), p(s.n_k);
  for (size_t r = 0; r < rows.size(); ++r) {
    softmax_row(q.data() + (size_t(bh) * s.n_q + rows[r]) * s.head_dim,
                k.data() + size_t(bh) * s.n_k * s.head_dim, s, p);
    std::copy(p.begin(), p.end(), out.begin() + r * s.n_k);
  }
  return out;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](double x) { return float(x); });
  return out;
}

}  // namespace lab
