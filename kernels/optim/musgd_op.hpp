// MuSGD's step over a tensor list (musgd_step.cu + muon_newton_schulz.cu): what `--optimizer MuSGD` (and
// `auto` for runs over 10000 iterations) steps with.
#pragma once
#include <vector>

#include "kernels/optim/muon_op.hpp"
#include "kernels/optim/optim_op.hpp"

namespace lab {

const KernelSpec& musgd_step_spec();

// Defaults: ultralytics/optim/muon.py's MuSGD (muon 0.5, sgd 0.5) with `auto`'s momentum 0.9.
struct MusgdSettings {
  std::array<double, kOptimGroups> lr{0.01, 0.01, 0.01};
  double momentum = 0.9;
  double weight_decay = 5e-4;  // group 0 only
  double muon = 0.5, sgd = 0.5;
};

// The [rows, cols] view and update scale of a tensor that takes a Muon update; rows = 0: none.
struct MuonShape {
  int rows = 0, cols = 0;
  double scale = 1;
};

MusgdStepParams step_params(const MusgdSettings& s, HalfType half);

class MusgdOp {
 public:
  explicit MusgdOp(Backend& backend);
  // `shapes` has one entry per tensor of `list`; a tensor with rows > 0 must have its muon_update set.
  // `gate` as OptimStepOp::step's: set and not finite, the step writes nothing (its orthogonalisation only
  // its muon_update scratch).
  void step(const OptimTensorList& list, const std::vector<MuonShape>& shapes, const MusgdSettings& s,
            HalfType half = HalfType::f16, const float* gate = nullptr);

 private:
  CompiledKernel momentum_, apply_;
  MuonOrthogonalizeOp muon_;
};

}  // namespace lab
