// MuSGD's chain of launches (musgd_op.hpp).
#include "kernels/optim/musgd_op.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

MusgdStepParams step_params(const MusgdSettings& s, HalfType half) {
  MusgdStepParams p{};
  for (int g = 0; g < kOptimGroups; ++g) {
    const double lr = s.lr[size_t(g)];
    p.lr[g] = float(lr), p.muon_lr[g] = float(lr * s.muon), p.sgd_lr[g] = float(lr * s.sgd);
    p.weight_decay[g] = g == 0 ? float(s.weight_decay) : 0.0f;
  }
  p.momentum = float(s.momentum);
  p.lerp_weight = float(1.0 - s.momentum);
  p.half_type = half == HalfType::bf16 ? 1 : 0;
  return p;
}

MusgdOp::MusgdOp(Backend& backend)
    : momentum_(backend, musgd_step_spec(), "v1", "musgd_muon_momentum"),
      apply_(backend, musgd_step_spec(), "v1", "musgd_apply"),
      muon_(backend) {}

void MusgdOp::step(const OptimTensorList& list, const std::vector<MuonShape>& shapes, const MusgdSettings& s,
                   HalfType half, const float* gate) {
  if (shapes.size() != size_t(list.size()))
    throw UsageError("musgd: " + std::to_string(shapes.size()) + " shapes for " +
                     std::to_string(list.size()) + " tensors");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const OptimTensor& t = list.tensors()[i];
    const bool muon = shapes[i].rows > 0;
    if (muon != (t.muon_update != nullptr) || (muon && (long long)shapes[i].rows * shapes[i].cols != t.count))
      throw UsageError("musgd: tensor " + std::to_string(i) +
                       "'s Muon shape does not match its count or its muon_update buffer");
  }
  MusgdStepParams p = step_params(s, half);
  p.tensors = list.device_table(), p.n_tensors = list.size(), p.gate = gate;
  const LaunchConfig config{{unsigned(list.total_blocks()), 1, 1}, {unsigned(kOptimThreads), 1, 1}};
  momentum_.launch(config, p);
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i].rows > 0) {
      float* u = list.tensors()[i].muon_update;
      muon_.run(u, shapes[i].rows, shapes[i].cols, shapes[i].scale, u);
    }
  apply_.launch(config, p);
}

}  // namespace lab
