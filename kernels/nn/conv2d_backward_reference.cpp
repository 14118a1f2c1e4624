// Conv2d backward reference: z recomputed per output element, dz = dy * silu'(z), then scattered to dX, dW and
// db tap by tap; float64 throughout.
#include "kernels/nn/conv2d_backward_reference.hpp"

#include <cmath>

namespace lab {

double silu_derivative(double z) {
  const double sigmoid = 1.0 / (1.0 + std::exp(-z));
  return sigmoid * (1.0 + z * (1.0 - sigmoid));
}

Conv2dGradients conv2d_backward_reference(const Conv2dShape& s, int batch, int h, int w,
                                          const std::vector<float>& in, const std::vector<float>& weight,
                                          const std::vector<float>& bias, const std::vector<float>& grad_out) {
  const int ho = s.out_size(h), wo = s.out_size(w), pad = s.kernel / 2, k = s.kernel;
  const int in_per_group = s.c_in / s.groups, out_per_group = s.c_out / s.groups;
  const auto in_index = [&](int b, int c, int y, int x) { return ((size_t(b) * s.c_in + c) * h + y) * w + x; };
  const auto w_index = [&](int co, int ci, int ky, int kx) {
    return ((size_t(co) * in_per_group + ci) * k + ky) * k + kx;
  };
  // The input pixel tap (ky, kx) of output (y, x) reads, or false in the zero padding.
  const auto tap = [&](int y, int x, int ky, int kx, int& iy, int& ix) {
    iy = y * s.stride - pad + ky, ix = x * s.stride - pad + kx;
    return iy >= 0 && iy < h && ix >= 0 && ix < w;
  };
  Conv2dGradients g{std::vector<double>(grad_out.size()), std::vector<double>(in.size()),
                    std::vector<double>(weight.size()), std::vector<double>(size_t(s.c_out))};
  size_t o = 0;
  for (int b = 0; b < batch; ++b)
    for (int co = 0; co < s.c_out; ++co) {
      const int first_in = (co / out_per_group) * in_per_group;
      for (int y = 0; y < ho; ++y)
        for (int x = 0; x < wo; ++x, ++o) {
          double dz = grad_out[o];
          if (s.silu) {
            double z = bias[co];
            for (int ci = 0; ci < in_per_group; ++ci)
              for (int ky = 0; ky < k; ++ky)
                for (int kx = 0; kx < k; ++kx)
                  if (int iy, ix; tap(y, x, ky, kx, iy, ix))
                    z += double(in[in_index(b, first_in + ci, iy, ix)]) * weight[w_index(co, ci, ky, kx)];
            dz *= silu_derivative(z);
          }
          g.grad_z[o] = dz;
          g.grad_bias[co] += dz;
          for (int ci = 0; ci < in_per_group; ++ci)
            for (int ky = 0; ky < k; ++ky)
              for (int kx = 0; kx < k; ++kx)
                if (int iy, ix; tap(y, x, ky, kx, iy, ix)) {
                  g.grad_in[in_index(b, first_in + ci, iy, ix)] += dz * weight[w_index(co, ci, ky, kx)];
                  g.grad_weight[w_index(co, ci, ky, kx)] += dz * in[in_index(b, first_in + ci, iy, ix)];
                }
        }
    }
  return g;
}

}  // namespace lab
