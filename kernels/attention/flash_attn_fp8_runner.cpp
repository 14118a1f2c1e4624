// Runner flash_attn2_fwd_fp8: seeded random Q, K, V (those of the other attention runners) quantised to e4m3
// with per-tensor scales, the fp8 Hopper forward of flash_attn_fp8.cu (V^T pre-pass + forward), O (fp16) and
// L checked against the float64 reference on the dequantised inputs: the kernel's own error (P rounded to
// e4m3, float accumulation, O rounded to fp16). A runner of its own, not a DTYPE of flash_attn2_fwd_half: its
// inputs carry scales, it has one HEAD_DIM and a pre-pass, and none of that runner's tile parameters.
#include <algorithm>
#include <cmath>

#include "kernels/attention/attention_runner_support.hpp"
#include "kernels/attention/flash_attn_fp8_op.hpp"
#include "kernels/attention/fp8_quantize.hpp"
#include "kernels/common/half_type.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> fp8_param_specs() {
  ParamSpec head_dim{"HEAD_DIM", ParamSpec::Kind::Int, "128", "head dimension: 128"};
  head_dim.choices = {"128"};
  std::vector<ParamSpec> specs = attention_param_specs(head_dim);
  specs.push_back({"VT_PREPASS", ParamSpec::Kind::Bool, "true",
                   "true: every launch makes V^T (the pre-pass) and then runs the forward; false: V^T is made "
                   "once at set-up and a launch is the forward alone"});
  specs.push_back(exp2_fma_param("the forward"));
  return specs;
}

// O's error against the reference on the dequantised inputs comes from P rounded to e4m3 (the kernel rounds
// 448 P): a weight p of a row changes by at most 2^-4 p (e4m3's unit roundoff) or, below e4m3's normal range,
// by 2^-10 / 448 (half its subnormal spacing), so an output element O = sum p v / sum p (sum p >= 1: the row's
// largest weight is 1) moves by at most max |V| (2^-4 + N_CTX_K 2^-10 / 448). fp16 adds 2^-11 of |O|, and the
// accumulation: the H200 adds e4m3 products keeping about 14 bits (DeepSeek-V3 report, section 3.3.2), 2^-14
// of O a k32 product of P V, N_CTX_K / 32 of them (the emulator's float sums are far closer). That is the
// max_abs allowed (the last two with 2^-10 + N_CTX_K / 32 2^-14 of max |O|). rel_l2: 2^-4 (u); the rounding
// errors of a row's weights average out, measured about u / 3 (docs/kernels/attention.md).
Tolerance fp8_output_tolerance(const std::vector<double>& v, const std::vector<double>& o, int n_k) {
  double largest_v = 0, largest_o = 0;
  for (double x : v) largest_v = std::max(largest_v, std::abs(x));
  for (double x : o) largest_o = std::max(largest_o, std::abs(x));
  const double accumulation = 0x1p-10 + (n_k + 31) / 32 * 0x1p-14;
  return {0x1p-4, largest_v * (0x1p-4 + n_k * 0x1p-10 / 448) + accumulation * largest_o};
}

// L's error: the H200 adds the k32 e4m3 products of S = Q K^T keeping about 14 bits (as for O above), so a
// score q . k moves by at most HEAD_DIM / 32 x 2^-14 x sum_d |q_d k_d| <= HEAD_DIM / 32 x 2^-14 x max |q|
// max |k| (Cauchy-Schwarz over the rows' norms), times the softmax scale; L, a log-sum-exp of the scaled
// scores, moves by at most that, plus the 1e-4 of float32's exp2 / log2 the half runners allow (the emulator
// sums exactly, so only the 1e-4 shows there; the H200 measured max_abs 1.7e-4 to 3.0e-4 and rel_l2 1.0e-5 to
// 1.2e-5 over the [gpu] shapes, past the 1e-5 / 1e-4 of the 16-bit kernels). rel_l2: that bound over L's root
// mean square (every element within it).
Tolerance fp8_lse_tolerance(const std::vector<double>& q, const std::vector<double>& k, const AttentionShape& s,
                            const std::vector<double>& lse) {
  const auto largest_norm = [&](const std::vector<double>& x) {
    double largest = 0;
    for (size_t row = 0; row + s.head_dim <= x.size(); row += s.head_dim) {
      double sq = 0;
      for (int d = 0; d < s.head_dim; ++d) sq += x[row + d] * x[row + d];
      largest = std::max(largest, std::sqrt(sq));
    }
    return largest;
  };
  const double max_abs =
      std::abs(s.scale) * (s.head_dim / 32.0) * 0x1p-14 * largest_norm(q) * largest_norm(k) + 1e-4;
  double sq = 0;
  for (double l : lse) sq += l * l;
  const double rms = lse.empty() ? 1.0 : std::sqrt(sq / double(lse.size()));
  return {std::max(1e-5, max_abs / std::max(rms, 1e-30)), max_abs};
}

class Fp8ForwardInstance : public InstanceBase {
 public:
  Fp8ForwardInstance(Backend& b, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(b), size_(p), op_(b, int(param_int(p, "EXP2_FMA"))), prepass_(param_bool(p, "VT_PREPASS")) {
    const AttentionInputs in = random_attention_inputs(size_, seed, false);
    q_ = quantize_e4m3(in.q), k_ = quantize_e4m3(in.k), v_ = quantize_e4m3(in.v);
    q_buf_ = b.upload_vector(q_.codes), k_buf_ = b.upload_vector(k_.codes), v_buf_ = b.upload_vector(v_.codes);
    const AttentionShape& s = size_.shape;
    vt_buf_ = b.alloc_array<uint8_t>(size_t(s.batch_heads) * s.head_dim * fp8_padded_keys(s.n_k));
    if (!prepass_) transpose();
    o_ = output_array<uint16_t>(size_.q_elems());
    lse_ = output_array<float>(size_.rows());
  }
  void launch() override {
    if (prepass_) transpose();
    op_.forward(q_buf_.as<const uint8_t>(), k_buf_.as<const uint8_t>(), vt_buf_.as<const uint8_t>(),
                o_.as<uint16_t>(), lse_.as<float>(), size_.problem(), {q_.scale, k_.scale, v_.scale});
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const AttentionSize& z = size_;
    if (ref_.o.empty()) ref_ = attention_forward_reference(q_.values, k_.values, v_.values, z.shape);
    return {make_check("O", z.q_dims(), half_bits_to_float(fetch<uint16_t>(o_, z.q_elems()), HalfType::f16),
                       ref_.o, tol.value_or(fp8_output_tolerance(v_.values, ref_.o, z.shape.n_k)),
                       keep_for_viewer(z.q_elems())),
            make_check("L", z.row_dims(), fetch<float>(lse_, z.rows()), ref_.lse,
                       tol.value_or(fp8_lse_tolerance(q_.values, k_.values, z.shape, ref_.lse)),
                       keep_for_viewer(z.rows()))};
  }
  WorkCounts work() const override {
    const AttentionSize& z = size_;
    // Bytes: e4m3 Q, K, V^T read, fp16 O and float L written; the pre-pass reads V and writes V^T.
    const double vt_traffic = prepass_ ? 2.0 * z.k_elems() : 0.0;
    return {3.0 * z.q_elems() + 2.0 * z.k_elems() + 4.0 * z.rows() + vt_traffic, z.forward_flops()};
  }

 private:
  void transpose() {
    op_.transpose_v(v_buf_.as<const uint8_t>(), vt_buf_.as<uint8_t>(), size_.shape.batch_heads, size_.shape.n_k);
  }
  AttentionSize size_;
  FlashAttnFp8Op op_;
  bool prepass_;
  E4m3Tensor q_, k_, v_;
  DeviceBuffer q_buf_, k_buf_, v_buf_, vt_buf_, o_, lse_;
  AttentionForwardRef ref_;
};

const KernelSpec spec{
    .name = "flash_attn2_fwd_fp8",
    .family = "attention",
    .description = "Flash Attention forward with e4m3 Q, K, V (per-tensor scales), float accumulation, fp16 O",
    .source = kFlashAttnFp8Source,
    .variants = {{"wgmma",
                  "Hopper (sm_90a): a V^T pre-pass, then TMA loads on an mbarrier ring, a producer warpgroup and "
                  "two consumer warpgroups of e4m3 wgmma k32 (HEAD_DIM 128)"}},
    .params = fp8_param_specs(),
    .compile = [](const std::string&, const Params& p) {
      return fa_fp8_compile_request(int(param_int(p, "EXP2_FMA")));
    }};

const bool registered = register_runner(spec, make_instance<Fp8ForwardInstance>());

}  // namespace
}  // namespace lab
