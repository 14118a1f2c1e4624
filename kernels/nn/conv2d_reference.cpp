// Conv2d reference: a plain loop nest per output element, float64 sums.
#include "kernels/nn/conv2d_reference.hpp"

#include <cmath>

namespace lab {

std::vector<double> conv2d_reference(const Conv2dShape& s, int batch, int h, int w,
                                     const std::vector<float>& in, const std::vector<float>& weight,
                                     const std::vector<float>& bias, const std::vector<float>& residual) {
  const int ho = s.out_size(h), wo = s.out_size(w), pad = s.kernel / 2, k = s.kernel;
  const int in_per_group = s.c_in / s.groups, out_per_group = s.c_out / s.groups;
  std::vector<double> out(size_t(batch) * s.c_out * ho * wo);
  size_t o = 0;
  for (int b = 0; b < batch; ++b)
    for (int co = 0; co < s.c_out; ++co) {
      const int first_in = (co / out_per_group) * in_per_group;
      for (int y = 0; y < ho; ++y)
        for (int x = 0; x < wo; ++x, ++o) {
          double sum = bias[co];
          for (int ci = 0; ci < in_per_group; ++ci)
            for (int ky = 0; ky < k; ++ky)
              for (int kx = 0; kx < k; ++kx) {
                const int iy = y * s.stride - pad + ky, ix = x * s.stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const double v = in[((size_t(b) * s.c_in + first_in + ci) * h + iy) * w + ix];
                sum += v * weight[((size_t(co) * in_per_group + ci) * k + ky) * k + kx];
              }
          if (s.silu) sum = sum / (1.0 + std::exp(-sum));
          if (!residual.empty()) sum += residual[o];
          out[o] = sum;
        }
    }
  return out;
}

}  // namespace lab
