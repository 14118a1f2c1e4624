// Anchor-grid construction from the feature-map sizes and strides.
#include "kernels/detect/anchor_grid.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

AnchorGrid make_anchor_grid(int image_height, int image_width, const std::vector<int>& strides) {
  AnchorGrid g;
  for (int s : strides) {
    if (s <= 0 || image_height <= 0 || image_width <= 0 || image_height % s || image_width % s)
      throw UsageError("image size " + std::to_string(image_height) + "x" + std::to_string(image_width) +
                       " (h x w) is not a positive multiple of stride " + std::to_string(s));
    const int h = image_height / s, w = image_width / s;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        g.x.push_back(float(x) + 0.5f);
        g.y.push_back(float(y) + 0.5f);
        g.stride.push_back(float(s));
      }
  }
  return g;
}

}  // namespace lab
