// The Newton-Schulz chain of launches (muon_op.hpp).
#include "kernels/optim/muon_op.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/optim/muon_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

MuonOrthogonalizeOp::MuonOrthogonalizeOp(Backend& backend)
    : normalize_(backend, muon_orthogonalize_spec(), "v1_fp32", "muon_normalize"),
      gemm_(backend, muon_orthogonalize_spec(), "v1_fp32", "muon_gemm") {}

double muon_update_scale(const std::vector<int64_t>& shape) {
  if (shape.size() < 2) throw UsageError("muon: the gradient has fewer than two dimensions");
  return std::sqrt(std::max(1.0, double(shape[shape.size() - 2]) / double(shape.back())));
}

void MuonOrthogonalizeOp::run(const float* g, int rows, int cols, double scale, float* out) {
  if (rows < 1 || cols < 1) throw UsageError("muon: the matrix has no elements");
  Backend& backend = gemm_.backend();
  const int r = std::min(rows, cols), c = std::max(rows, cols);  // X is [r, c]
  const size_t count = size_t(r) * size_t(c), gram = size_t(r) * size_t(r);
  if (count > capacity_) {
    x_ = backend.alloc(count * sizeof(float)), x_next_ = backend.alloc(count * sizeof(float));
    capacity_ = count;
  }
  if (gram > gram_capacity_) {
    gram_ = backend.alloc(gram * sizeof(float)), poly_ = backend.alloc(gram * sizeof(float));
    gram_capacity_ = gram;
  }
  normalize_.launch({{1, 1, 1}, {256, 1, 1}}, MuonNormalizeParams{g, x_.as<float>(), rows, cols, 1e-7f});
  auto gemm = [&](MuonGemmParams p) {
    const unsigned tiles_n = unsigned((p.n + kMuonTile - 1) / kMuonTile);
    const unsigned tiles_m = unsigned((p.m + kMuonTile - 1) / kMuonTile);
    gemm_.launch({{tiles_n, tiles_m, 1}, {unsigned(kMuonTile), unsigned(kMuonTile), 1}}, p);
  };
  float* gram_m = gram_.as<float>();
  float* poly = poly_.as<float>();
  const bool transposed = rows > cols;
  for (int step = 0; step < kMuonNsSteps; ++step) {
    const float* x = x_.as<float>();
    // A = X X^T: B operand is X read transposed.
    gemm({x, c, 1, x, 1, c, nullptr, 0, 0, gram_m, r, 1, r, r, c, 1.0f, 0.0f});
    // B = c A A + b A.
    gemm({gram_m, r, 1, gram_m, r, 1, gram_m, r, 1, poly, r, 1, r, r, r, float(kMuonNsC), float(kMuonNsB)});
    const bool last = step == kMuonNsSteps - 1;
    // X' = B X + a X; the last step writes the result, transposed back and scaled, into `out`.
    float* dst = last ? out : x_next_.as<float>();
    const long long dst_row = last && transposed ? 1 : c, dst_col = last && transposed ? cols : 1;
    const double s = last ? scale : 1.0;
    gemm({poly, r, 1, x, c, 1, x, c, 1, dst, dst_row, dst_col, r, c, r, float(s), float(kMuonNsA * s)});
    if (!last) std::swap(x_, x_next_);
  }
}

}  // namespace lab
