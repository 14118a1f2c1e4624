// Runner for conv2d: random input, weights (scaled by 1/sqrt(fan-in) so outputs stay O(1)), bias and
// residual; the input, residual and output are channel windows of larger poisoned buffers. Checked against
// the float64 reference; the channels around the output window must stay untouched.
#include <utility>

#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/sliced_buffer.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// float32 variants: sums of up to C_in*K*K float32 products of O(1/sqrt(fan-in)) terms land at rel_l2 ~1e-7,
// within Tolerance's default. v4_tf32 rounds both operands to 10 mantissa bits (relative error up to 2^-11
// each, uniform): measured rel_l2 0.7e-4..2.4e-4 and max_abs <= 4.5e-4 over scenarios/nn_conv2d_tf32.toml,
// whatever the reduction length. 2e-3 / 5e-3 leaves ten times that, while a kernel that drops one 16-row
// reduction chunk (rel_l2 >= sqrt(16 / rows) > 8e-2 up to the 2304-row P5 convs) or the bias (+-0.5 per
// channel) fails by orders of magnitude.
constexpr Tolerance kTf32Tolerance{2e-3, 5e-3};
// v5_fp16 rounds both operands to the same 10 mantissa bits as TF32 (the inputs here are far from fp16's
// range limits), so v4's bar applies unchanged. v6_bf16 keeps 7 mantissa bits, 8x TF32's rounding step:
// measured rel_l2 5.5e-4..1.9e-3 (v5: 0.7e-4..2.4e-4) and max_abs <= 3.3e-3 over
// scenarios/nn_conv2d_half.toml on the emulator; 8x v4's bar. A dropped 32-row chunk (rel_l2 >= sqrt(32 /
// rows) > 0.11 up to 2304 rows) still fails.
constexpr Tolerance kBf16Tolerance{1.6e-2, 4e-2};

Tolerance variant_tolerance(ConvVariant v) {
  if (v == ConvVariant::Tf32 || conv_variant_half_type(v) == HalfType::f16) return kTf32Tolerance;
  if (conv_variant_half_type(v) == HalfType::bf16) return kBf16Tolerance;
  return {};
}

class Conv2dInstance : public InstanceBase {
 public:
  Conv2dInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        shape_(conv2d_shape(p)),
        batch_(int(param_int(p, "B"))),
        h_(int(param_int(p, "H"))),
        w_(int(param_int(p, "W"))),
        ho_(shape_.out_size(h_)),
        wo_(shape_.out_size(w_)),
        kernels_(backend),
        in_(backend, batch_, shape_.c_in, int64_t(h_) * w_),
        out_(backend, batch_, shape_.c_out, int64_t(ho_) * wo_, 2, 1) {
    Conv2dInputs inputs = conv2d_random_inputs(shape_, batch_, h_, w_, seed);
    in_host_ = std::move(inputs.in), weight_ = std::move(inputs.weight), bias_ = std::move(inputs.bias);
    in_.upload_window(in_host_);
    if (param_bool(p, "RESIDUAL")) {
      residual_host_ = random_uniform(out_.window_elements(), -1.0f, 1.0f, derive_seed(seed, "residual"));
      residual_.emplace(backend, batch_, shape_.c_out, int64_t(ho_) * wo_, 3, 1);
      residual_->upload_window(residual_host_);
    }
    op_.emplace(kernels_, shape_, weight_, bias_, Precision::Fp32, parse_conv_variant(variant));
    // The split-K path runs whenever the op would split at this size, as it does inside the network.
    if (size_t floats = op_->splitk_workspace_floats(batch_, h_, w_))
      splitk_ = backend.alloc_array<float>(floats);
  }
  void poison() override { out_.poison(); }
  void launch() override {
    op_->run(batch_, h_, w_, in_.view(), out_.view(),
             residual_ ? ConstPlaneView(residual_->view()) : ConstPlaneView{}, splitk_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const Tolerance variant_tol = variant_tolerance(op_->variant());
    return {make_check("out", {size_t(batch_), size_t(shape_.c_out), size_t(ho_), size_t(wo_)},
                       out_.download_window(),
                       conv2d_reference(shape_, batch_, h_, w_, in_host_, weight_, bias_, residual_host_),
                       tol.value_or(variant_tol)),
            out_.untouched_check("out_neighbours")};
  }
  WorkCounts work() const override {
    const double outputs = double(batch_) * shape_.c_out * ho_ * wo_;
    const double bytes =
        4.0 * (double(in_host_.size()) + weight_.size() + bias_.size() + outputs + (residual_ ? outputs : 0));
    return {bytes, 2.0 * outputs * (shape_.c_in / shape_.groups) * shape_.kernel * shape_.kernel};
  }

 private:
  Conv2dShape shape_;
  int batch_, h_, w_, ho_, wo_;
  NnKernels kernels_;
  SlicedBuffer in_, out_;
  std::optional<SlicedBuffer> residual_;
  std::vector<float> in_host_, weight_, bias_, residual_host_;
  std::optional<Conv2dOp> op_;
  DeviceBuffer splitk_;  // partial sums of the split-K path (empty when the op does not split)
};

const bool registered = register_runner(conv2d_spec(), make_instance<Conv2dInstance>());

}  // namespace
}  // namespace lab
