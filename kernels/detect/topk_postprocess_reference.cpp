// Two-stage top-k reference: stage 1 over anchors, stage 2 over the (rank, class) pairs, each a partial sort
// by (key descending, index ascending).
#include "kernels/detect/topk_postprocess_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace lab {

uint32_t topk_ranking_key(float logit) {
  uint32_t bits;
  std::memcpy(&bits, &logit, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

namespace {

// Indices of the k best entries of `keys`, best first (larger key, then lower index).
std::vector<uint32_t> top_indices(const std::vector<uint32_t>& keys, int k) {
  std::vector<uint32_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](uint32_t a, uint32_t b) { return keys[a] != keys[b] ? keys[a] > keys[b] : a < b; });
  idx.resize(size_t(k));
  return idx;
}

}  // namespace

std::vector<double> topk_postprocess_reference(const std::vector<float>& boxes,
                                               const std::vector<float>& logits, int batch, int anchors,
                                               int classes, int max_det) {
  const int k = std::min(max_det, anchors);
  std::vector<double> out(size_t(batch) * k * 6);
  for (int b = 0; b < batch; ++b) {
    const float* lg = logits.data() + size_t(b) * classes * anchors;
    const float* bx = boxes.data() + size_t(b) * 4 * anchors;
    std::vector<uint32_t> anchor_keys(size_t(anchors), 0);
    for (int c = 0; c < classes; ++c)
      for (int a = 0; a < anchors; ++a)
        anchor_keys[a] = std::max(anchor_keys[a], topk_ranking_key(lg[size_t(c) * anchors + a]));
    const std::vector<uint32_t> best_anchors = top_indices(anchor_keys, k);
    std::vector<uint32_t> pair_keys(size_t(k) * classes);
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < classes; ++c)
        pair_keys[size_t(r) * classes + c] = topk_ranking_key(lg[size_t(c) * anchors + best_anchors[r]]);
    const std::vector<uint32_t> best_pairs = top_indices(pair_keys, k);
    for (int r = 0; r < k; ++r) {
      const int cls = int(best_pairs[r] % classes), a = int(best_anchors[best_pairs[r] / classes]);
      const double cx = bx[a], cy = bx[anchors + a], w = bx[2 * size_t(anchors) + a],
                   h = bx[3 * size_t(anchors) + a];
      double* row = out.data() + (size_t(b) * k + r) * 6;
      row[0] = cx - w / 2;
      row[1] = cy - h / 2;
      row[2] = cx + w / 2;
      row[3] = cy + h / 2;
      row[4] = 1.0 / (1.0 + std::exp(-double(lg[size_t(cls) * anchors + a])));
      row[5] = cls;
    }
  }
  return out;
}

}  // namespace lab
