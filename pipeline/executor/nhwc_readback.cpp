// NHWC readback: one download of a view's span, converted to float and transposed to NCHW on the host; the
// attention maps from q, k and the logsumexp.
#include "pipeline/executor/nhwc_readback.hpp"

#include <cmath>

#include "nvrtc_runtime/backend.hpp"

namespace lab {
namespace {

// The elements of `a`'s span (pixel p's channel c at p * pitch + c) as floats.
std::vector<float> download_span(Backend& backend, const NhwcActivation& a) {
  std::vector<unsigned char> bytes((size_t(a.pixels() - 1) * size_t(a.pitch) + size_t(a.channels)) *
                                   size_t(activation_bytes(a.type)));
  backend.download(bytes.data(), a.data, bytes.size());
  return activation_bytes_to_float(bytes, a.type);
}

}  // namespace

std::vector<float> download_nhwc(Backend& backend, const NhwcActivation& a) {
  const std::vector<float> span = download_span(backend, a);
  const size_t plane = size_t(a.height) * size_t(a.width);
  std::vector<float> nchw(size_t(a.batch) * size_t(a.channels) * plane);
  for (size_t b = 0; b < size_t(a.batch); ++b)
    for (size_t p = 0; p < plane; ++p)
      for (size_t c = 0; c < size_t(a.channels); ++c)
        nchw[(b * size_t(a.channels) + c) * plane + p] = span[(b * plane + p) * size_t(a.pitch) + c];
  return nchw;
}

NamedTensor nhwc_attention_map(Backend& backend, const NhwcAttentionRun& run) {
  const PsaDims& d = run.op->dims();
  const size_t n = size_t(d.n), heads = size_t(d.num_heads), kd = size_t(d.key_dim),
               pitch = size_t(run.qkv.pitch);
  const size_t maps = size_t(d.batch_heads());
  const std::vector<float> qkv = download_span(backend, run.qkv);
  std::vector<float> lse(maps * n);
  backend.download(lse.data(), run.lse, lse.size() * sizeof(float));
  NamedTensor t{"attn." + run.name, {d.batch, d.num_heads, d.n, d.n}, std::vector<float>(maps * n * n)};
  for (size_t bh = 0; bh < maps; ++bh) {
    const size_t b = bh / heads, h = bh % heads;
    // Per head the channels [q (KD) | k (KD) | v (2 KD)]; token i of image b is pixel b * N + i.
    auto q = [&](size_t i) { return &qkv[(b * n + i) * pitch + h * 4 * kd]; };
    auto k = [&](size_t j) { return &qkv[(b * n + j) * pitch + h * 4 * kd + kd]; };
    for (size_t i = 0; i < n; ++i) {
      const float* qi = q(i);
      for (size_t j = 0; j < n; ++j) {
        const float* kj = k(j);
        double dot = 0;
        for (size_t c = 0; c < kd; ++c) dot += double(qi[c]) * double(kj[c]);
        t.values[(bh * n + i) * n + j] = float(std::exp(double(d.scale) * dot - double(lse[bh * n + i])));
      }
    }
  }
  return t;
}

}  // namespace lab
