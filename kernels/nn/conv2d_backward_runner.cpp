// Runners conv2d_dgrad and conv2d_wgrad: seeded x, weights and bias (conv2d_inputs.hpp, as conv2d's runner)
// and dy; the forward's pre-activation z is made on the host (float64 reference, rounded to float32, as
// the forward would have stored it). A launch is the backward the network runs: SiLU backward into dz with
// the bias gradient summed in the same pass (when SILU), then the input gradient (dgrad) or the weight (and
// without SILU the bias) gradients (wgrad). Checked against the float64 reference backward
// (conv2d_backward_reference.hpp).
#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/nn/conv2d_backward_op.hpp"
#include "kernels/nn/conv2d_backward_reference.hpp"
#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {

// float32 (v1, v2): the default rel_l2 1e-5 / max_abs 1e-4. v3_fp16 rounds both operands to 11 significant
// bits, as conv2d's v5_fp16, whose bar applies (rel_l2 2e-3, max_abs 5e-3); v4_bf16 keeps 8 bits, 8x that, as
// conv2d's v6_bf16. The weight and bias gradients sum B*Ho*Wo products (204,800 at batch 32, 640x640): their
// values grow like sqrt(B*Ho*Wo), and so does the rounding, so their max_abs also scales with the largest
// gradient: 2e-6 of it in float32, where such sums stay near 1e-7 with split-K keeping each partial short;
// the rel_l2 bar of it in 16 bits (measured on the emulator over k1/k3 shapes: max_abs <= 5.5e-3 at a largest
// |dW| of 19, 3e-4 of it, for fp16; 4.4e-2, 2.3e-3 of it, for bf16). A dropped chunk, tap or split fails
// rel_l2 by orders of magnitude.
Tolerance conv_backward_gradient_tolerance(ConvBackwardVariant v, const std::vector<double>& ref,
                                           bool sums_grow) {
  Tolerance t;
  double per_largest = 2e-6;
  if (v == ConvBackwardVariant::Fp16 || v == ConvBackwardVariant::Fp16Patch)
    t = {2e-3, 5e-3}, per_largest = 2e-3;
  if (v == ConvBackwardVariant::Bf16 || v == ConvBackwardVariant::Bf16Patch)
    t = {1.6e-2, 4e-2}, per_largest = 1.6e-2;
  if (!sums_grow) return t;
  double largest = 0;
  for (double value : ref) largest = std::max(largest, std::abs(value));
  t.max_abs = std::max(t.max_abs, per_largest * largest);
  return t;
}

namespace {

ConvBackwardVariant resolve(const std::string& variant, const Conv2dShape& s) {
  return parse_conv_backward_variant(variant).value_or(choose_conv_backward_variant(s));
}

// What both runners share: the problem, its host tensors and the op's SiLU backward into dz (and db).
class Conv2dBackwardInstance : public InstanceBase {
 protected:
  Conv2dBackwardInstance(Backend& backend, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        shape_(conv2d_shape(p)),
        batch_(int(param_int(p, "B"))),
        h_(int(param_int(p, "H"))),
        w_(int(param_int(p, "W"))),
        ho_(shape_.out_size(h_)),
        wo_(shape_.out_size(w_)) {
    Conv2dInputs inputs = conv2d_random_inputs(shape_, batch_, h_, w_, seed);
    in_host_ = std::move(inputs.in), weight_ = std::move(inputs.weight), bias_ = std::move(inputs.bias);
    grad_out_host_ = random_uniform(out_count(), -1.0f, 1.0f, derive_seed(seed, "grad_out"));
    grad_out_ = backend.upload_vector(grad_out_host_);
    if (shape_.silu) {
      Conv2dShape linear = shape_;
      linear.silu = false;
      const std::vector<double> z = conv2d_reference(linear, batch_, h_, w_, in_host_, weight_, bias_, {});
      z_ = backend.upload_vector(std::vector<float>(z.begin(), z.end()));
      grad_z_ = backend.alloc_array<float>(out_count());
    }
  }
  // dz on the device: dy itself without SiLU, else the SiLU backward's output, which also writes the bias
  // gradient into grad_bias (its workspace sized by the op, once made: reserve_silu_workspace).
  const float* grad_z(const Conv2dBackwardOp& op, float* grad_bias) const {
    if (!shape_.silu) return grad_out_.as<const float>();
    op.silu_backward(batch_, ho_ * wo_, grad_out_.as<const float>(), int64_t(shape_.c_out) * ho_ * wo_,
                     z_.as<const float>(), grad_z_.as<float>(), grad_bias, bias_workspace_.as<float>());
    return grad_z_.as<const float>();
  }
  void reserve_silu_workspace(const Conv2dBackwardOp& op) {
    if (size_t floats = shape_.silu ? op.bias_grad_workspace_floats(batch_) : 0)
      bias_workspace_ = backend_.alloc_array<float>(floats);
  }
  Conv2dGradients reference() const {
    return conv2d_backward_reference(shape_, batch_, h_, w_, in_host_, weight_, bias_, grad_out_host_);
  }
  WorkCounts work_of(double bytes_written) const {
    const double products =
        double(out_count()) * (shape_.c_in / shape_.groups) * shape_.kernel * shape_.kernel;
    const double read = 4.0 * (double(out_count()) * (shape_.silu ? 2 : 1) + weight_.size() + in_host_.size());
    return {read + bytes_written, 2.0 * products};
  }
  size_t in_count() const { return size_t(batch_) * shape_.c_in * h_ * w_; }
  size_t out_count() const { return size_t(batch_) * shape_.c_out * ho_ * wo_; }

  Conv2dShape shape_;
  int batch_, h_, w_, ho_, wo_;
  std::vector<float> in_host_, weight_, bias_, grad_out_host_;
  DeviceBuffer grad_out_, z_, grad_z_, bias_workspace_;
};

// With GATE, dx goes through the input's own SiLU backward, as the training tape fuses it into this launch:
// dx = silu'(z_in) * sum, z_in seeded over [-6, 6] (SiLU's derivative from -0.1 to 1.1 there).
class Conv2dDgradInstance : public Conv2dBackwardInstance {
 public:
  Conv2dDgradInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : Conv2dBackwardInstance(backend, p, seed),
        variant_(resolve(variant, shape_)),
        op_(backend, shape_, weight_, variant_, std::nullopt),
        gate_host_(param_bool(p, "GATE") ? random_uniform(in_count(), -6.0f, 6.0f, derive_seed(seed, "gate"))
                                         : std::vector<float>()),
        gate_(gate_host_.empty() ? DeviceBuffer() : backend.upload_vector(gate_host_)),
        grad_in_(output_array<float>(in_count())),
        grad_bias_(backend.alloc_array<float>(bias_.size())) {
    reserve_silu_workspace(op_);
  }
  void launch() override {
    const int64_t plane = int64_t(h_) * w_, image = shape_.c_in * plane;
    op_.input_grad(batch_, h_, w_, grad_z(op_, grad_bias_.as<float>()), {grad_in_.as<float>(), image, plane},
                   false,
                   gate_host_.empty() ? ConstPlaneView{} : ConstPlaneView{gate_.as<float>(), image, plane});
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    std::vector<double> ref = reference().grad_in;
    for (size_t i = 0; i < gate_host_.size(); ++i) ref[i] *= silu_derivative(gate_host_[i]);
    return {make_check("grad_in", {size_t(batch_), size_t(shape_.c_in), size_t(h_), size_t(w_)},
                       fetch<float>(grad_in_, in_count()), ref,
                       tol.value_or(conv_backward_gradient_tolerance(variant_, ref, false)))};
  }
  WorkCounts work() const override { return work_of(4.0 * double(in_count() + gate_host_.size())); }

 private:
  ConvBackwardVariant variant_;
  Conv2dBackwardOp op_;
  std::vector<float> gate_host_;             // z_in, empty without GATE
  DeviceBuffer gate_, grad_in_, grad_bias_;  // grad_bias_: the SiLU backward's, checked by conv2d_wgrad
};

class Conv2dWgradInstance : public Conv2dBackwardInstance {
 public:
  Conv2dWgradInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : Conv2dBackwardInstance(backend, p, seed),
        variant_(resolve(variant, shape_)),
        op_(backend, shape_, weight_, std::nullopt, variant_),
        in_(backend.upload_vector(in_host_)),
        grad_weight_(output_array<float>(weight_.size())),
        grad_bias_(output_array<float>(bias_.size())) {
    if (size_t floats = op_.weight_grad_workspace_floats(batch_, h_, w_))
      workspace_ = backend.alloc_array<float>(floats);
    reserve_silu_workspace(op_);
  }
  // With SiLU the bias gradient comes from the SiLU backward (conv2d_silu_bias_backward), else from
  // weight_grad (v2-v5: the weight gradient's own launch; v1: conv2d_bias_grad).
  void launch() override {
    float* grad_bias = grad_bias_.as<float>();
    op_.weight_grad(batch_, h_, w_, dense_view(in_.as<const float>(), shape_.c_in, int64_t(h_) * w_),
                    grad_z(op_, grad_bias), grad_weight_.as<float>(), shape_.silu ? nullptr : grad_bias,
                    workspace_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const Conv2dGradients ref = reference();
    const Conv2dShape& s = shape_;
    return {make_check("grad_weight",
                       {size_t(s.c_out), size_t(s.c_in / s.groups), size_t(s.kernel), size_t(s.kernel)},
                       fetch<float>(grad_weight_, weight_.size()), ref.grad_weight,
                       tol.value_or(conv_backward_gradient_tolerance(variant_, ref.grad_weight, true))),
            make_check("grad_bias", {size_t(s.c_out)}, fetch<float>(grad_bias_, bias_.size()), ref.grad_bias,
                       // the bias gradient is a float32 sum of dz in every variant
                       tol.value_or(conv_backward_gradient_tolerance(ConvBackwardVariant::Tiled,
                                                                     ref.grad_bias, true)))};
  }
  WorkCounts work() const override { return work_of(4.0 * double(weight_.size() + bias_.size())); }

 private:
  ConvBackwardVariant variant_;
  Conv2dBackwardOp op_;
  DeviceBuffer in_, grad_weight_, grad_bias_, workspace_;
};

const bool registered_dgrad = register_runner(conv2d_dgrad_spec(), make_instance<Conv2dDgradInstance>());
const bool registered_wgrad = register_runner(conv2d_wgrad_spec(), make_instance<Conv2dWgradInstance>());

}  // namespace
}  // namespace lab
