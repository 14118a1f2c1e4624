// Max-pool and upsample backward references: a loop over the outputs, each scattering its gradient.
#include "kernels/nn/plane_backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace lab {

std::vector<double> maxpool2d_backward_reference(const std::vector<float>& in,
                                                 const std::vector<float>& grad_out, int batch, int channels,
                                                 int h, int w, int kernel) {
  const int pad = kernel / 2;
  const size_t plane = size_t(h) * w;
  std::vector<double> grad_in(in.size(), 0.0);
  for (size_t n = 0; n < size_t(batch) * channels; ++n) {
    const float* x = in.data() + n * plane;
    for (int y = 0; y < h; ++y)
      for (int xo = 0; xo < w; ++xo) {
        // PyTorch: maxval = -inf, maxidx = the window's first cell; `val > maxval || isnan(val)` replaces.
        double best = -INFINITY;
        size_t best_index = size_t(std::max(y - pad, 0)) * w + size_t(std::max(xo - pad, 0));
        for (int iy = y - pad; iy <= y + pad; ++iy)
          for (int ix = xo - pad; ix <= xo + pad; ++ix) {
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[size_t(iy) * w + ix];
            if (v > best || std::isnan(v)) {
              best = v;
              best_index = size_t(iy) * w + ix;
            }
          }
        grad_in[n * plane + best_index] += grad_out[n * plane + size_t(y) * w + xo];
      }
  }
  return grad_in;
}

std::vector<double> upsample_nearest2x_backward_reference(const std::vector<float>& grad_out, int batch,
                                                          int channels, int h, int w) {
  const int ho = 2 * h, wo = 2 * w;
  std::vector<double> grad_in(size_t(batch) * channels * h * w, 0.0);
  for (size_t n = 0; n < size_t(batch) * channels; ++n)
    for (int y = 0; y < ho; ++y)
      for (int x = 0; x < wo; ++x)
        grad_in[(n * h + size_t(y) * h / ho) * w + size_t(x) * w / wo] += grad_out[(n * ho + y) * wo + x];
  return grad_in;
}

}  // namespace lab
