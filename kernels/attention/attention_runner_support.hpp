// Pieces shared by the attention runners (flash_attn2_runners.cpp, flash_attn2_half_runners.cpp): the common
// parameters, the resolved problem and its sizes, the seeded inputs, and the forward and backward instances
// (the whole backward, or its dQ or dK/dV kernel alone; O and L from the forward kernel or the reference, as
// OL says), written once for any precision.
//
// A precision (Float32, flash_attn2_runners.cpp; Half16, flash_attn2_half_runners.cpp), made from (variant,
// resolved params), gives the op (`Op`, `make_op(backend, head_dim)`), the element type (`Element`) and its
// `encode` / `decode` from and to float, an output's `tolerance(float32 default, reference)` and
// `fused_dq()`.
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

// The OL parameter of the backward runners: where the O and L they feed the backward come from, `kernel`
// (the default: the variant's own forward kernel, so a forward bug fails the gradients' check too) or
// `reference` (the float64 forward rounded to the element type: the backward checked alone).
ParamSpec forward_outputs_param();
// EXP2_FMA of the Hopper forwards (fp16 / bf16 and fp8): how many of every 8 softmax exponentials run on the
// FMA pipe (attention/exp2_fma.cuh), 0 to 8; `which`: the variants it applies to.
ParamSpec exp2_fma_param(const std::string& which);

// What the backward instances share: seeded Q, K, V and dO, O and L as OL says, and the check of dQ, dK and
// dV against the float64 reference gradients of the inputs (whatever O and L the kernels were fed).
template <class Precision>
class AttentionGradientsBase : public InstanceBase {
 protected:
  using E = typename Precision::Element;

  AttentionGradientsBase(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b), s_(b, variant, p) {
    const AttentionSize& z = s_.size;
    const AttentionInputs in = random_attention_inputs(z, seed, true);
    q_ = s_.upload(b, in.q), k_ = s_.upload(b, in.k), v_ = s_.upload(b, in.v), d_o_ = s_.upload(b, in.d_o);
    if (param_str(p, "OL") == "kernel") {
      o_ = b.alloc_array<E>(z.q_elems()), lse_ = b.alloc_array<float>(z.rows());
      s_.op.forward(q_.ptr(), k_.ptr(), v_.ptr(), o_.as<E>(), lse_.as<float>(), z.problem());
    } else {
      const auto fwd = attention_forward_reference(q_.values(), k_.values(), v_.values(), z.shape);
      o_ = b.upload_vector(s_.precision.encode(to_float(fwd.o)));
      lse_ = b.upload_vector(to_float(fwd.lse));
    }
  }
  const E* o() const { return o_.as<const E>(); }
  const float* lse() const { return lse_.as<const float>(); }
  // Gradients sum Nq (dK, dV) or Nk (dQ) float32 terms of both signs: relative error a few 1e-7 per term
  // growth, still far under 1e-5; max_abs scaled to their magnitude (up to ~10 at N = 4096).
  // `name` against the reference gradient `which` (dQ [BH, Nq, D]; dK, dV [BH, Nk, D]).
  OutputCheck grad_check(const char* name, const DeviceBuffer& buf,
                         std::vector<double> AttentionGradsRef::*which, const std::optional<Tolerance>& tol) {
    const AttentionSize& z = s_.size;
    if (ref_.dq.empty())
      ref_ = attention_backward_reference(q_.values(), k_.values(), v_.values(), d_o_.values(), z.shape);
    const bool queries = which == &AttentionGradsRef::dq;
    const std::vector<double>& ref = ref_.*which;
    return make_check(name, queries ? z.q_dims() : z.k_dims(),
                      s_.precision.decode(this->template fetch<E>(buf, ref.size())), ref,
                      tol.value_or(s_.precision.tolerance(Tolerance{1e-5, 1e-3}, ref)),
                      keep_for_viewer(z.q_elems() + z.k_elems()));
  }

  AttentionSetup<Precision> s_;
  AttentionTensor<E> q_, k_, v_, d_o_;

 private:
  DeviceBuffer o_, lse_;
  AttentionGradsRef ref_;
};

// dQ, dK and dV from seeded Q, K, V and dO: the whole backward (preprocess, dQ, dK/dV, or the fused dQ) in
// one launch, fed O and L as OL says.
template <class Precision>
class AttentionBackwardInstance : public AttentionGradientsBase<Precision> {
  using Base = AttentionGradientsBase<Precision>;
  using E = typename Base::E;
  using Base::s_, Base::q_, Base::k_, Base::v_, Base::d_o_;

 public:
  AttentionBackwardInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : Base(b, variant, p, seed) {
    const AttentionSize& z = s_.size;
    scratch_ = this->template output_array<float>(s_.op.backward_scratch_floats(z.problem()));
    dq_ = this->template output_array<E>(z.q_elems()), dk_ = this->template output_array<E>(z.k_elems()),
    dv_ = this->template output_array<E>(z.k_elems());
  }
  void launch() override {
    s_.op.backward(q_.ptr(), k_.ptr(), v_.ptr(), this->o(), d_o_.ptr(), this->lse(), scratch_.as<float>(),
                   dq_.as<E>(), dk_.as<E>(), dv_.as<E>(), s_.size.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    return {this->grad_check("dQ", dq_, &AttentionGradsRef::dq, tol),
            this->grad_check("dK", dk_, &AttentionGradsRef::dk, tol),
            this->grad_check("dV", dv_, &AttentionGradsRef::dv, tol)};
  }
  WorkCounts work() const override {
    // Q, K, V, O, dO read by the preprocess and the dK/dV kernel (and again by a separate dQ kernel), dQ, dK,
    // dV written; float L and D (D written once, read by each kernel); a fused dQ writes its float
    // accumulator once (zeroing) and reads it once (conversion). FLOPs: the five products of the FA2
    // backward (S, dP, dV, dK, dQ; a separate dQ kernel's recomputed S and dP not counted).
    const AttentionSize& z = s_.size;
    const double q = double(z.q_elems()), k = double(z.k_elems()), rows = double(z.rows());
    const double passes = s_.precision.fused_dq() ? 1 : 2, acc = s_.precision.fused_dq() ? 8.0 * q : 0.0;
    return {double(sizeof(E)) * (passes * (3 * q + 2 * k) + q + 2 * k) + 4.0 * (1 + passes) * rows + acc,
            2.5 * z.forward_flops()};
  }

 private:
  DeviceBuffer scratch_, dq_, dk_, dv_;
};

// One backward kernel alone, dQ or dK/dV: the set-up runs the forward (OL) and the preprocess (D), so a
// launch (and a benchmark) is that kernel only.
enum class GradientKernel { dq, dkdv };

template <class Precision, GradientKernel KERNEL>
class AttentionGradientKernelInstance : public AttentionGradientsBase<Precision> {
  using Base = AttentionGradientsBase<Precision>;
  using E = typename Base::E;
  using Base::s_, Base::q_, Base::k_, Base::v_, Base::d_o_;
  static constexpr bool kDq = KERNEL == GradientKernel::dq;

 public:
  AttentionGradientKernelInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : Base(b, variant, p, seed) {
    const AttentionSize& z = s_.size;
    delta_ = b.alloc_array<float>(z.rows());
    s_.op.backward_preprocess(this->o(), d_o_.ptr(), delta_.as<float>(), z.problem());
    if (kDq)
      dq_ = this->template output_array<E>(z.q_elems());
    else
      dk_ = this->template output_array<E>(z.k_elems()), dv_ = this->template output_array<E>(z.k_elems());
  }
  void launch() override {
    const float* delta = delta_.as<const float>();
    if constexpr (kDq)
      s_.op.backward_dq(q_.ptr(), k_.ptr(), v_.ptr(), d_o_.ptr(), this->lse(), delta, dq_.as<E>(),
                        s_.size.problem());
    else
      s_.op.backward_dkdv(q_.ptr(), k_.ptr(), v_.ptr(), d_o_.ptr(), this->lse(), delta, dk_.as<E>(),
                          dv_.as<E>(), s_.size.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    if (kDq) return {this->grad_check("dQ", dq_, &AttentionGradsRef::dq, tol)};
    return {this->grad_check("dK", dk_, &AttentionGradsRef::dk, tol),
            this->grad_check("dV", dv_, &AttentionGradsRef::dv, tol)};
  }
  WorkCounts work() const override {
    // Reads Q, dO, K, V, L and D once, writes dQ (or dK and dV). FLOPs: the kernel's own products, each
    // 2 Nq Nk D: dQ recomputes S = Q K^T and dP = dO V^T, then dQ = dS K (3 products, 1.5x the forward's
    // 4 Nq Nk D); dK/dV computes S^T, dP^T, dV = P^T dO and dK = dS^T Q (4 products, 2x the forward).
    const AttentionSize& z = s_.size;
    const double q = double(z.q_elems()), k = double(z.k_elems()), written = kDq ? q : 2 * k;
    return {double(sizeof(E)) * (2 * q + 2 * k + written) + 8.0 * z.rows(),
            (kDq ? 1.5 : 2.0) * z.forward_flops()};
  }

 private:
  DeviceBuffer delta_, dq_, dk_, dv_;
};

}  // namespace lab
