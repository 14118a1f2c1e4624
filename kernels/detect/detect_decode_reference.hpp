// CPU reference of detect-decode, written from the Detect head's definition (xyxy from anchor -/+ distances,
// then centre form), independently of the kernel's algebra; float64.
#pragma once
#include <vector>

#include "kernels/detect/anchor_grid.hpp"

namespace lab {

// raw [B, 4, A] (l, t, r, b) -> [B, 4, A] (cx, cy, w, h) in pixels.
std::vector<double> detect_decode_reference(const std::vector<float>& raw, const AnchorGrid& grid, int batch);

}  // namespace lab
