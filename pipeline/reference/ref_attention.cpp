// Attention reference. The qkv conv's channels are laid out per head as [q (key_dim) | k (key_dim) |
// v (head_dim)]; v viewed as [B, dim, H, W] (head major) feeds the positional conv.
#include "pipeline/reference/ref_attention.hpp"

#include <algorithm>
#include <cmath>

#include "pipeline/reference/parallel_for.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab::reference {

AttentionResult attention(const AttentionSpec& spec, const RefTensor& x) {
  const RefTensor qkv = conv2d(spec.qkv, x);
  const int B = x.batch, heads = spec.num_heads, kd = spec.key_dim, hd = spec.head_dim;
  const int per_head = 2 * kd + hd;
  const size_t N = x.plane();
  RefTensor v(B, spec.dim, x.height, x.width);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < heads; ++h)
      std::copy_n(qkv.channel(b, h * per_head + 2 * kd), size_t(hd) * N, v.channel(b, h * hd));

  AttentionResult result;
  result.probabilities.resize(size_t(B) * heads * N * N);
  RefTensor mixed(B, spec.dim, x.height, x.width);
  parallel_for(size_t(B) * heads * N, [&](size_t job) {
    const size_t i = job % N;
    const int h = int(job / N % heads), b = int(job / N / heads);
    const float* q = qkv.channel(b, h * per_head);
    const float* k = qkv.channel(b, h * per_head + kd);
    std::vector<double> p(N);
    double best = -INFINITY;
    for (size_t j = 0; j < N; ++j) {
      double dot = 0;
      for (int d = 0; d < kd; ++d) dot += double(q[d * N + i]) * double(spec.scale) * double(k[d * N + j]);
      p[j] = dot;
      best = std::max(best, dot);
    }
    double sum = 0;
    for (double& e : p) sum += (e = std::exp(e - best));
    float* stored = result.probabilities.data() + (size_t(b) * heads + h) * N * N + i * N;
    for (size_t j = 0; j < N; ++j) stored[j] = float(p[j] /= sum);
    for (int d = 0; d < hd; ++d) {
      const float* vd = v.channel(b, h * hd + d);
      double acc = 0;
      for (size_t j = 0; j < N; ++j) acc += double(vd[j]) * p[j];
      mixed.channel(b, h * hd + d)[i] = float(acc);
    }
  });
  add_inplace(mixed, conv2d(spec.pe, v));
  result.out = conv2d(spec.proj, mixed);
  return result;
}

}  // namespace lab::reference
