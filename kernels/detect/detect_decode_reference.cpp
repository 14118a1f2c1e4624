// Detect-decode reference: x1y1 = anchor - lt, x2y2 = anchor + rb, times stride; then centre and size.
#include "kernels/detect/detect_decode_reference.hpp"

namespace lab {

std::vector<double> detect_decode_reference(const std::vector<float>& raw, const AnchorGrid& grid,
                                            int batch) {
  const size_t A = grid.size();
  std::vector<double> out(size_t(batch) * 4 * A);
  for (int b = 0; b < batch; ++b) {
    const float* d = raw.data() + size_t(b) * 4 * A;
    double* o = out.data() + size_t(b) * 4 * A;
    for (size_t a = 0; a < A; ++a) {
      const double s = grid.stride[a];
      const double x1 = (grid.x[a] - double(d[a])) * s, y1 = (grid.y[a] - double(d[A + a])) * s;
      const double x2 = (grid.x[a] + double(d[2 * A + a])) * s, y2 = (grid.y[a] + double(d[3 * A + a])) * s;
      o[a] = (x1 + x2) / 2;
      o[A + a] = (y1 + y2) / 2;
      o[2 * A + a] = x2 - x1;
      o[3 * A + a] = y2 - y1;
    }
  }
  return out;
}

}  // namespace lab
