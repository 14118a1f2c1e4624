// CPU reference of the end-to-end post-process (spec/yolo26.md), written from the two torch.topk calls with
// std::partial_sort, independently of the kernel. Ranking as the kernel documents it: a logit's IEEE bits
// mapped to an order-preserving integer (the score order), ties to the lower index (anchor index in stage 1,
// flat index rank * nc + class in stage 2).
#pragma once
#include <cstdint>
#include <vector>

namespace lab {

// The order-preserving integer of a float's bits (larger float -> larger key; -0 just below +0).
uint32_t topk_ranking_key(float logit);

// boxes [B, 4, A] (cx, cy, w, h), logits [B, nc, A] -> [B, K, 6] rows x1, y1, x2, y2, sigmoid score, class;
// K = min(max_det, A).
std::vector<double> topk_postprocess_reference(const std::vector<float>& boxes,
                                               const std::vector<float>& logits, int batch, int anchors,
                                               int classes, int max_det);

}  // namespace lab
