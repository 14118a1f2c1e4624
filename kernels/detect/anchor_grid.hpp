// The YOLO26 anchor grid: for each level (strides 8, 16, 32 by default), row-major over its H x W cells,
// anchor centres (x + 0.5, y + 0.5) in grid units; levels concatenated P3, P4, P5.
#pragma once
#include <cstddef>
#include <vector>

namespace lab {

struct AnchorGrid {
  std::vector<float> x, y, stride;  // each [A]
  size_t size() const { return x.size(); }
};

// Input size in pixels (multiples of the largest stride). Throws UsageError otherwise.
AnchorGrid make_anchor_grid(int image_height, int image_width, const std::vector<int>& strides = {8, 16, 32});

}  // namespace lab
