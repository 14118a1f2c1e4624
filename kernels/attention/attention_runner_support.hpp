// Pieces shared by the attention runners (flash_attn2_runners.cpp, flash_attn2_half_runners.cpp): the common
// parameters, the resolved problem and its sizes, the seeded inputs, and the forward and backward instances,
// written once for any precision.
//
// A precision (Float32, flash_attn2_runners.cpp; Half16, flash_attn2_half_runners.cpp), made from (variant,
// resolved params), gives the op (`Op`, `make_op(backend, head_dim)`), the element type (`Element`) and its
// `encode` / `decode` from and to float, an output's `tolerance(float32 default, reference)` and `fused_dq()`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/runner.hpp"

namespace lab {

// BH, N_CTX_Q, N_CTX_K, the runner's own HEAD_DIM spec, then SCALE.
std::vector<ParamSpec> attention_param_specs(const ParamSpec& head_dim);

// The problem of BH, N_CTX_Q, N_CTX_K, HEAD_DIM and SCALE (0: 1/sqrt(HEAD_DIM)), the scale rounded to float
// as the kernels receive it.
struct AttentionSize {
  AttentionShape shape;

  explicit AttentionSize(const Params& p);
  AttentionProblem problem() const { return {shape.batch_heads, shape.n_q, shape.n_k, float(shape.scale)}; }
  size_t q_elems() const { return size_t(shape.batch_heads) * shape.n_q * shape.head_dim; }
  size_t k_elems() const { return size_t(shape.batch_heads) * shape.n_k * shape.head_dim; }
  size_t rows() const { return size_t(shape.batch_heads) * shape.n_q; }
  // [BH, Nq, D]: Q, O, dO, dQ; [BH, Nk, D]: K, V, dK, dV; [BH, Nq]: L.
  std::vector<size_t> q_dims() const { return {size_t(shape.batch_heads), size_t(shape.n_q), head_dim()}; }
  std::vector<size_t> k_dims() const { return {size_t(shape.batch_heads), size_t(shape.n_k), head_dim()}; }
  std::vector<size_t> row_dims() const { return {size_t(shape.batch_heads), size_t(shape.n_q)}; }
  size_t head_dim() const { return size_t(shape.head_dim); }
  double forward_flops() const {
    return 4.0 * shape.batch_heads * shape.n_q * double(shape.n_k) * shape.head_dim;
  }
};

// Seeded inputs: Q and K uniform in [-2, 2) (scores spread wide enough that the softmax is far from
// uniform), V and dO in [-1, 1); dO only when asked for.
struct AttentionInputs {
  std::vector<float> q, k, v, d_o;
};
AttentionInputs random_attention_inputs(const AttentionSize& size, uint64_t seed, bool with_d_o);

// Whether make_check keeps an output of `elems` elements for the viewer's heatmap.
inline bool keep_for_viewer(size_t elems) {
  return elems <= (size_t(1) << 20);
}

// An input the kernels read, uploaded in the element type E, and its values as they read them (for the
// reference).
template <class E>
struct AttentionTensor {
  std::vector<double> values() const { return to_double(host); }
  const E* ptr() const { return buf.as<const E>(); }
  std::vector<float> host;
  DeviceBuffer buf;
};

// The problem, the precision and its op, and uploads in the element type: what every instance holds.
template <class Precision>
struct AttentionSetup {
  using Element = typename Precision::Element;
  AttentionSize size;
  Precision precision;
  typename Precision::Op op;

  AttentionSetup(Backend& b, const std::string& variant, const Params& p)
      : size(p), precision(variant, p), op(precision.make_op(b, size.shape.head_dim)) {}
  AttentionTensor<Element> upload(Backend& b, const std::vector<float>& values) const {
    const std::vector<Element> elements = precision.encode(values);
    return {precision.decode(elements), b.upload_vector(elements)};
  }
};

// O and L from seeded Q, K, V, checked against the float64 reference on the values the kernels read.
template <class Precision>
class AttentionForwardInstance : public InstanceBase {
  using E = typename Precision::Element;

 public:
  AttentionForwardInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b), s_(b, variant, p) {
    const AttentionInputs in = random_attention_inputs(s_.size, seed, false);
    q_ = s_.upload(b, in.q), k_ = s_.upload(b, in.k), v_ = s_.upload(b, in.v);
    o_ = output_array<E>(s_.size.q_elems());
    lse_ = output_array<float>(s_.size.rows());
  }
  void launch() override {
    s_.op.forward(q_.ptr(), k_.ptr(), v_.ptr(), o_.as<E>(), lse_.as<float>(), s_.size.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const AttentionSize& z = s_.size;
    if (ref_.o.empty()) ref_ = attention_forward_reference(q_.values(), k_.values(), v_.values(), z.shape);
    // O: float32 sums of Nk products (the precision may round more). L: float scores of exactly
    // representable inputs, so float32 rounding only (~1e-7 relative) in every precision.
    return {make_check("O", z.q_dims(), s_.precision.decode(fetch<E>(o_, z.q_elems())), ref_.o,
                       tol.value_or(s_.precision.tolerance(Tolerance{1e-5, 1e-4}, ref_.o)),
                       keep_for_viewer(z.q_elems())),
            make_check("L", z.row_dims(), fetch<float>(lse_, z.rows()), ref_.lse,
                       tol.value_or(Tolerance{1e-5, 1e-4}), keep_for_viewer(z.rows()))};
  }
  WorkCounts work() const override {
    const AttentionSize& z = s_.size;
    return {double(sizeof(E)) * (2.0 * z.q_elems() + 2.0 * z.k_elems()) + 4.0 * z.rows(), z.forward_flops()};
  }

 private:
  AttentionSetup<Precision> s_;
  AttentionTensor<E> q_, k_, v_;
  DeviceBuffer o_, lse_;
  AttentionForwardRef ref_;
};

// dQ, dK and dV from seeded Q, K, V and dO. O (in the element type) and L (float) come from the float64
// reference forward, so the backward is checked on its own.
template <class Precision>
class AttentionBackwardInstance : public InstanceBase {
  using E = typename Precision::Element;

 public:
  AttentionBackwardInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b), s_(b, variant, p) {
    const AttentionSize& z = s_.size;
    const AttentionInputs in = random_attention_inputs(z, seed, true);
    q_ = s_.upload(b, in.q), k_ = s_.upload(b, in.k), v_ = s_.upload(b, in.v), d_o_ = s_.upload(b, in.d_o);
    const auto fwd = attention_forward_reference(q_.values(), k_.values(), v_.values(), z.shape);
    o_ = s_.upload(b, to_float(fwd.o));
    lse_ = b.upload_vector(to_float(fwd.lse));
    scratch_ = output_array<float>(s_.op.backward_scratch_floats(z.problem()));
    dq_ = output_array<E>(z.q_elems()), dk_ = output_array<E>(z.k_elems()),
    dv_ = output_array<E>(z.k_elems());
  }
  void launch() override {
    s_.op.backward(q_.ptr(), k_.ptr(), v_.ptr(), o_.ptr(), d_o_.ptr(), lse_.as<const float>(),
                   scratch_.as<float>(), dq_.as<E>(), dk_.as<E>(), dv_.as<E>(), s_.size.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const AttentionSize& z = s_.size;
    if (ref_.dq.empty())
      ref_ = attention_backward_reference(q_.values(), k_.values(), v_.values(), d_o_.values(), z.shape);
    // Gradients sum Nq (dK, dV) or Nk (dQ) float32 terms of both signs: relative error a few 1e-7 per term
    // growth, still far under 1e-5; max_abs scaled to their magnitude (up to ~10 at N = 4096).
    const bool keep = keep_for_viewer(z.q_elems() + z.k_elems());
    auto grad = [&](const char* name, std::vector<size_t> dims, const DeviceBuffer& buf, size_t count,
                    const std::vector<double>& ref) {
      return make_check(name, std::move(dims), s_.precision.decode(fetch<E>(buf, count)), ref,
                        tol.value_or(s_.precision.tolerance(Tolerance{1e-5, 1e-3}, ref)), keep);
    };
    return {grad("dQ", z.q_dims(), dq_, z.q_elems(), ref_.dq),
            grad("dK", z.k_dims(), dk_, z.k_elems(), ref_.dk),
            grad("dV", z.k_dims(), dv_, z.k_elems(), ref_.dv)};
  }
  WorkCounts work() const override {
    // Q, K, V, O, dO read by the preprocess and the dK/dV kernel (and again by a separate dQ kernel), dQ, dK,
    // dV written; float L and D (D written once, read by each kernel); a fused dQ writes its float
    // accumulator once (zeroing) and reads it once (conversion).
    const AttentionSize& z = s_.size;
    const double q = double(z.q_elems()), k = double(z.k_elems()), rows = double(z.rows());
    const double passes = s_.precision.fused_dq() ? 1 : 2, acc = s_.precision.fused_dq() ? 8.0 * q : 0.0;
    return {double(sizeof(E)) * (passes * (3 * q + 2 * k) + q + 2 * k) + 4.0 * (1 + passes) * rows + acc,
            2.5 * z.forward_flops()};
  }

 private:
  AttentionSetup<Precision> s_;
  AttentionTensor<E> q_, k_, v_, d_o_, o_;
  DeviceBuffer lse_, scratch_, dq_, dk_, dv_;
  AttentionGradsRef ref_;
};

}  // namespace lab
