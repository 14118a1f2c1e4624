// Runners clip_grad_norm, sgd_step and adamw_step: the seeded OptimProblem through the ops, checked against
// the float64 references (optim_reference.hpp). A step runner's launch runs STEPS steps, the first from the
// pristine inputs (so every launch, and every benchmark repetition, computes the same thing).
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "kernels/optim/musgd_op.hpp"
#include "kernels/optim/optim_problem.hpp"
#include "kernels/optim/optim_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// float32 carries 2^-24 relative per rounding. A weight (|p| <= ~3) is rounded once per step and its update
// has a few roundings of its own: after STEPS <= 20 steps it is within ~20 * 2.4e-7 of the float64 value;
// measured ~1e-7 (rel_l2 ~5e-8) at 3 steps. 2e-6 absolute / 1e-6 rel_l2 leave room for 20 steps and catch an
// update 0.1 % off (a 1e-3 update off by 1e-6 shows in the "update" check below).
constexpr Tolerance kWeightTolerance{1e-6, 2e-6};
// The update (weights after - before) carries the weights' absolute error over updates of lr-size:
// ~1e-7 / (STEPS * lr * |m / sqrt(v)|) relative; with lr = 1e-3 over 3 steps that is ~3e-5; 3e-4 catches a
// wrong bias correction, decay or lr by far (each >= 1e-3 relative at the defaults).
constexpr Tolerance kUpdateTolerance{3e-4, 2e-6};
// Momentum and moment buffers: a few float32 roundings per step on values <= ~3.
constexpr Tolerance kStateTolerance{1e-6, 2e-6};
// A 16-bit copy: round to nearest of the float32 weight, so within half an ulp of the 16-bit type (2^-11
// relative for fp16, 2^-8 for bf16) of the float64 weight, plus the weight's own error.
constexpr Tolerance kF16CopyTolerance{5e-4, 1.5e-3};
constexpr Tolerance kBf16CopyTolerance{4e-3, 1.2e-2};

std::optional<HalfType> half_of(const Params& p) {
  const std::string& h = param_str(p, "HALF");
  if (h == "none") return std::nullopt;
  return parse_half_type(h);
}

std::vector<double> concatenated(const std::vector<std::vector<double>>& tensors) {
  std::vector<double> out;
  for (const auto& t : tensors) out.insert(out.end(), t.begin(), t.end());
  return out;
}

// What distinguishes the two step runners: their settings from the parameters, the reference step of one
// tensor, the names of their state buffers, and the flops of one element's update.
// LR for groups 0 and 1, BIAS_LR for group 2.
std::array<double, kOptimGroups> group_lrs(const Params& p) {
  return {param_float(p, "LR"), param_float(p, "LR"), param_float(p, "BIAS_LR")};
}
void read_settings(const Params& p, SgdSettings& s) {
  s.lr = group_lrs(p);
  s.momentum = param_float(p, "MOMENTUM");
  s.weight_decay = param_float(p, "WD");
}
void read_settings(const Params& p, AdamwSettings& s) {
  s.lr = group_lrs(p);
  s.beta1 = param_float(p, "BETA1");
  s.beta2 = param_float(p, "BETA2");
  s.eps = param_float(p, "EPS");
  s.weight_decay = param_float(p, "WD");
}
void read_settings(const Params& p, MusgdSettings& s) {
  s.lr = group_lrs(p), s.momentum = param_float(p, "MOMENTUM"), s.weight_decay = param_float(p, "WD");
  s.muon = param_float(p, "MUON");
  s.sgd = param_float(p, "SGD");
}

// MuSGD's runner gives every group-0 tensor a Muon update, viewed [a, b] (a the largest divisor of its count
// up to its square root) for even i and [b, a] (tall: transposed inside, scaled) for odd i.
MuonShape muon_shape_of(const OptimProblem& problem, size_t i) {
  if (problem.groups[i] != 0) return {};
  const long long count = problem.counts[i];
  long long a = 1;
  for (long long d = 1; d * d <= count; ++d)
    if (count % d == 0) a = d;
  const int rows = int(i % 2 == 0 ? a : count / a), cols = int(count / rows);
  return {rows, cols, muon_update_scale({rows, cols})};
}

void reference_step(const SgdSettings& s, int group, std::vector<double>& param, std::vector<double>& buf,
                    std::vector<double>&, const std::vector<double>& grad, int step) {
  sgd_nesterov_reference_step(param, buf, grad, s.lr[size_t(group)], s.momentum,
                              group == 0 ? s.weight_decay : 0.0, step);
}
void reference_step(const AdamwSettings& s, int group, std::vector<double>& param, std::vector<double>& m,
                    std::vector<double>& v, const std::vector<double>& grad, int step) {
  adamw_reference_step(param, m, v, grad, s.lr[size_t(group)], s.beta1, s.beta2, s.eps,
                       group == 0 ? s.weight_decay : 0.0, step);
}
void reference_step(const MusgdSettings& s, const MuonShape& shape, int group, std::vector<double>& param,
                    std::vector<double>& buf, std::vector<double>& muon_buf, const std::vector<double>& grad,
                    int) {
  musgd_reference_step(param, buf, muon_buf, grad, shape.rows, shape.cols, shape.scale, s.lr[size_t(group)],
                       s.momentum, group == 0 ? s.weight_decay : 0.0, s.muon, s.sgd);
}
std::vector<const char*> state_names(const SgdSettings&) {
  return {"momentum_buffer"};
}
std::vector<const char*> state_names(const MusgdSettings&) {
  return {"momentum_buffer", "muon_momentum_buffer"};
}
std::vector<const char*> state_names(const AdamwSettings&) {
  return {"exp_avg", "exp_avg_sq"};
}
double flops_per_element(const SgdSettings&) {
  return 7;
}
double flops_per_element(const AdamwSettings&) {
  return 14;
}
double flops_per_element(const MusgdSettings&) {
  return 14;
}  // the element-wise part; the gemms apart

// A step runner: the problem, the outputs (weights, one or two state buffers, the 16-bit copy), one tensor
// table per step; checks of weights, update, states and copy against STEPS reference steps.
template <class Settings>
class StepInstance : public InstanceBase {
  static constexpr bool kMusgd = std::is_same_v<Settings, MusgdSettings>;

 public:
  StepInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        steps_(int(param_int(p, "STEPS"))),
        half_(half_of(p)),
        problem_(backend, int(param_int(p, "TENSORS")), int(param_int(p, "SIZE")), steps_, seed),
        param_(output_array<float>(problem_.total)),
        state0_(output_array<float>(problem_.total)),
        state1_(state_names(settings_).size() > 1 ? output_array<float>(problem_.total) : DeviceBuffer{}),
        param16_(half_ ? output_array<uint16_t>(problem_.total) : DeviceBuffer{}),
        op_(backend) {
    read_settings(p, settings_);
    if constexpr (kMusgd) {
      for (size_t i = 0; i < problem_.tensors_count(); ++i) shapes_.push_back(muon_shape_of(problem_, i));
      muon_scratch_ = backend.alloc(problem_.total * sizeof(float));
    }
    for (int s = 0; s < steps_; ++s) lists_.emplace_back(backend, tensors_of_step(s));
  }
  void launch() override {
    for (int s = 0; s < steps_; ++s) {
      if constexpr (kMusgd)
        op_.step(lists_[size_t(s)], shapes_, settings_, half_.value_or(HalfType::f16));
      else
        op_.step(lists_[size_t(s)], settings_, s + 1, half_.value_or(HalfType::f16));
    }
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<const char*> names = state_names(settings_);
    const size_t n = problem_.tensors_count();
    std::vector<std::vector<double>> param(n), s0(n), s1(n);
    const std::vector<double> initial(problem_.initial_param.begin(), problem_.initial_param.end());
    for (size_t i = 0; i < n; ++i) param[i] = problem_.slice(initial, i);
    for (int s = 0; s < steps_; ++s) {
      const auto grads = problem_.step_gradients(s);
      for (size_t i = 0; i < n; ++i)
        if constexpr (kMusgd)
          reference_step(settings_, shapes_[i], problem_.groups[i], param[i], s0[i], s1[i], grads[i], s + 1);
        else
          reference_step(settings_, problem_.groups[i], param[i], s0[i], s1[i], grads[i], s + 1);
    }
    const std::vector<double> ref = concatenated(param);
    const std::vector<float> out = fetch<float>(param_, problem_.total);
    std::vector<float> update_out(out.size());
    std::vector<double> update_ref(ref.size());
    for (size_t i = 0; i < out.size(); ++i) {
      update_out[i] = float(double(out[i]) - double(problem_.initial_param[i]));
      update_ref[i] = ref[i] - double(problem_.initial_param[i]);
    }
    const std::vector<size_t> shape{problem_.total};
    std::vector<OutputCheck> checks{
        make_check("param", shape, out, ref, tol.value_or(kWeightTolerance)),
        make_check("update", shape, update_out, update_ref, tol.value_or(kUpdateTolerance))};
    checks.push_back(make_check(names[0], shape, fetch<float>(state0_, problem_.total), concatenated(s0),
                                tol.value_or(kStateTolerance)));
    if (names.size() > 1) {
      // MuSGD: only the Muon tensors have this buffer; the others' stretches are left unwritten.
      std::vector<float> state1 = fetch<float>(state1_, problem_.total), kept;
      for (size_t i = 0; i < n; ++i)
        if (!kMusgd || shapes_[i].rows > 0)
          kept.insert(kept.end(), state1.begin() + long(problem_.offsets[i]),
                      state1.begin() + long(problem_.offsets[i] + size_t(problem_.counts[i])));
      const std::vector<double> ref1 = concatenated(s1);
      checks.push_back(make_check(names[1], {ref1.size()}, kept, ref1, tol.value_or(kStateTolerance)));
    }
    if (half_)
      checks.push_back(
          make_check("param16", shape, half_bits_to_float(fetch<uint16_t>(param16_, problem_.total), *half_),
                     ref, tol.value_or(*half_ == HalfType::f16 ? kF16CopyTolerance : kBf16CopyTolerance)));
    return checks;
  }

  // Per step: read the gradient, weights and states, write weights, states and the optional copy.
  WorkCounts work() const override {
    const int states = int(state_names(settings_).size());
    const double n = double(problem_.total);
    const double bytes = n * (4.0 * (2 + 2 * states + 1) + (half_ ? 2.0 : 0.0));
    return {steps_ * bytes, steps_ * n * flops_per_element(settings_)};
  }

 private:
  Settings settings_;  // first: the constructor asks it for the state buffers
  int steps_;
  std::optional<HalfType> half_;
  OptimProblem problem_;
  DeviceBuffer param_, state0_, state1_, param16_;
  std::vector<OptimTensorList> lists_;
  std::vector<MuonShape> shapes_;  // MuSGD: each tensor's Muon view
  DeviceBuffer muon_scratch_;      // MuSGD: the Muon updates (scratch, not an output)
  std::conditional_t<kMusgd, MusgdOp, OptimStepOp<Settings>> op_;

  std::vector<OptimTensor> tensors_of_step(int s) {
    std::vector<OptimTensor> out;
    for (size_t i = 0; i < problem_.tensors_count(); ++i) {
      const size_t off = problem_.offsets[i];
      auto at = [&](const DeviceBuffer& b) { return b.get() ? b.as<float>() + off : nullptr; };
      float* param = at(param_);
      float* s0 = at(state0_);
      float* s1 = at(state1_);
      const float* zeros = problem_.zeros_device.as<const float>() + off;
      OptimTensor t{};
      t.grad_in = problem_.grads_device[size_t(s)].as<const float>() + off;
      t.param_in = s == 0 ? problem_.initial_param_device.as<const float>() + off : param;
      t.param = param;
      t.state0_in = s == 0 ? zeros : s0;
      t.state0 = s0;
      t.state1_in = s1 ? (s == 0 ? zeros : s1) : nullptr;
      t.state1 = s1;
      t.param16 = half_ ? param16_.as<unsigned short>() + off : nullptr;
      t.muon_update = kMusgd && shapes_[i].rows > 0 ? muon_scratch_.as<float>() + off : nullptr;
      t.count = problem_.counts[i];
      t.group = problem_.groups[i];
      out.push_back(t);
    }
    return out;
  }
};

class ClipGradNormInstance : public InstanceBase {
 public:
  ClipGradNormInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        max_norm_(param_float(p, "MAX_NORM")),
        problem_(backend, int(param_int(p, "TENSORS")), int(param_int(p, "SIZE")), 1, seed),
        grads_(scaled_to_norm(problem_.grads[0], param_float(p, "NORM"))),
        grads_device_(backend.upload_vector(grads_)),
        grad_out_(output_array<float>(problem_.total)),
        norm_(output_array<float>(1)),
        scale_(output_array<float>(1)),
        list_(backend, tensors()),
        op_(backend) {}
  void launch() override { op_.run(list_, float(max_norm_), norm_.as<float>(), scale_.as<float>()); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    std::vector<std::vector<double>> grads;
    const std::vector<double> flat(grads_.begin(), grads_.end());
    for (size_t i = 0; i < problem_.tensors_count(); ++i) grads.push_back(problem_.slice(flat, i));
    const double norm = total_grad_norm_reference(grads);
    const double scale = clip_scale_reference(norm, double(float(max_norm_)));
    std::vector<double> clipped(flat);
    for (double& g : clipped) g *= scale;
    double largest = 0;
    for (double g : clipped) largest = std::max(largest, std::abs(g));
    // One float32 rounding of the norm (the float64 sum is exact to far below it) and one of each product.
    return {make_check("total_norm", {1}, fetch<float>(norm_, 1), {norm},
                       tol.value_or(Tolerance{1e-6, 1e-6 * norm})),
            make_check("scale", {1}, fetch<float>(scale_, 1), {scale}, tol.value_or(Tolerance{1e-6, 1e-6})),
            make_check("grad", {problem_.total}, fetch<float>(grad_out_, problem_.total), clipped,
                       tol.value_or(Tolerance{1e-6, 1e-6 * largest}))};
  }
  // Pass 1 and 3 read the gradients, pass 3 writes them.
  WorkCounts work() const override {
    const double n = double(problem_.total);
    return {n * 12.0, n * 3.0};
  }

 private:
  static std::vector<float> scaled_to_norm(const std::vector<float>& g, double norm) {
    double sum = 0;
    for (float x : g) sum += double(x) * double(x);
    const double k = norm / std::sqrt(sum);
    std::vector<float> out(g.size());
    for (size_t i = 0; i < g.size(); ++i) out[i] = float(double(g[i]) * k);
    return out;
  }
  std::vector<OptimTensor> tensors() {
    std::vector<OptimTensor> out;
    for (size_t i = 0; i < problem_.tensors_count(); ++i) {
      OptimTensor t{};
      t.grad_in = grads_device_.as<const float>() + problem_.offsets[i];
      t.grad = grad_out_.as<float>() + problem_.offsets[i];
      t.count = problem_.counts[i];
      t.group = problem_.groups[i];
      out.push_back(t);
    }
    return out;
  }
  double max_norm_;
  OptimProblem problem_;
  std::vector<float> grads_;
  DeviceBuffer grads_device_, grad_out_, norm_, scale_;
  OptimTensorList list_;
  ClipGradNormOp op_;
};

const bool clip_registered = register_runner(clip_grad_norm_spec(), make_instance<ClipGradNormInstance>());
const bool sgd_registered = register_runner(sgd_step_spec(), make_instance<StepInstance<SgdSettings>>());
const bool adamw_registered =
    register_runner(adamw_step_spec(), make_instance<StepInstance<AdamwSettings>>());
const bool musgd_registered =
    register_runner(musgd_step_spec(), make_instance<StepInstance<MusgdSettings>>());

}  // namespace
}  // namespace lab
