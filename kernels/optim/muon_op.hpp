// Muon's Newton-Schulz orthogonalisation of one update matrix on the device (muon_newton_schulz.cu): what
// MuSGD applies to each weight of two or more dimensions, reshaped to [rows, cols].
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/compiled_kernel.hpp"

namespace lab {

const KernelSpec& muon_orthogonalize_spec();

// The quintic iteration Muon uses: five steps of X = a X + (b A + c A A) X, A = X X^T.
constexpr double kMuonNsA = 3.4445, kMuonNsB = -4.7750, kMuonNsC = 2.0315;
constexpr int kMuonNsSteps = 5;

// sqrt(max(1, shape[-2] / shape[-1])) of a gradient of two or more dimensions (1 for a square conv kernel).
double muon_update_scale(const std::vector<int64_t>& shape);

class MuonOrthogonalizeOp {
 public:
  explicit MuonOrthogonalizeOp(Backend& backend);
  // out [rows, cols] = NS5(g [rows, cols]) * scale; out may be g (g is read once, first). Ultralytics'
  // muon_update scales by sqrt(max(1, grad.size(-2) / grad.size(-1))) of the gradient before its reshape:
  // muon_update_scale.
  void run(const float* g, int rows, int cols, double scale, float* out);

 private:
  CompiledKernel normalize_, gemm_;
  DeviceBuffer x_, x_next_, gram_, poly_;
  size_t capacity_ = 0;  // elements of x_ / x_next_
  size_t gram_capacity_ = 0;
};

}  // namespace lab
