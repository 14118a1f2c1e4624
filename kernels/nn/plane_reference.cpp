// Max-pool and upsample references: explicit loops over the padded window / the source pixel.
#include "kernels/nn/plane_reference.hpp"

#include <algorithm>
#include <limits>

namespace lab {

std::vector<double> maxpool2d_reference(const std::vector<float>& in, int batch, int channels, int h, int w,
                                        int kernel) {
  const int pad = kernel / 2;
  std::vector<double> out(in.size());
  for (size_t plane = 0; plane < size_t(batch) * channels; ++plane) {
    const float* src = in.data() + plane * h * w;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double m = -std::numeric_limits<double>::infinity();
        for (int dy = -pad; dy <= pad; ++dy)
          for (int dx = -pad; dx <= pad; ++dx) {
            const int iy = y + dy, ix = x + dx;
            const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
            m = std::max(m, inside ? double(src[iy * w + ix]) : -std::numeric_limits<double>::infinity());
          }
        out[plane * h * w + size_t(y) * w + x] = m;
      }
  }
  return out;
}

std::vector<double> upsample_nearest2x_reference(const std::vector<float>& in, int batch, int channels, int h,
                                                 int w) {
  const int ho = 2 * h, wo = 2 * w;
  std::vector<double> out(size_t(batch) * channels * ho * wo);
  for (size_t plane = 0; plane < size_t(batch) * channels; ++plane)
    for (int y = 0; y < ho; ++y)
      for (int x = 0; x < wo; ++x)
        out[(plane * ho + y) * wo + x] = in[(plane * h + y * h / ho) * w + x * w / wo];
  return out;
}

}  // namespace lab
