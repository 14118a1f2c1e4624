// Runners flash_attn2_fwd, flash_attn2_bwd, flash_attn2_bwd_dq, flash_attn2_bwd_dkdv and attn_probs: seeded
// random Q, K, V (and dO), every variant of flash_attn2.cu checked element by element against the float64
// reference in attention_reference.cpp.
#include "kernels/attention/attention_runner_support.hpp"

namespace lab {
namespace {

// The rows per CTA of the tiled kernels: BLOCK_M, or by problem size when auto.
Fa2Blocks fa2_blocks(const Params& p) {
  if (param_str(p, "BLOCK_M") != "auto") {
    const int m = int(param_int(p, "BLOCK_M"));
    return {m, m, m};
  }
  return choose_fa2_blocks(int(param_int(p, "BH")), int(param_int(p, "N_CTX_Q")),
                           int(param_int(p, "N_CTX_K")), int(param_int(p, "HEAD_DIM")));
}

// float32 on FlashAttn2Op: the elements are the floats themselves, checked at the float32 tolerances.
struct Float32 {
  using Op = FlashAttn2Op;
  using Element = float;
  std::string variant;
  Fa2Blocks blocks;

  Float32(const std::string& variant, const Params& p) : variant(variant), blocks(fa2_blocks(p)) {}
  Op make_op(Backend& b, int head_dim) const { return {b, variant, head_dim, blocks}; }
  static std::vector<float> encode(const std::vector<float>& values) { return values; }
  static std::vector<float> decode(const std::vector<float>& values) { return values; }
  static Tolerance tolerance(const Tolerance& float32, const std::vector<double>&) { return float32; }
  static bool fused_dq() { return false; }
};

// Attention probabilities of head HEAD for ROWS query rows spread evenly, first and last included.
class ProbsInstance : public InstanceBase {
 public:
  ProbsInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b), s_(b, variant, p), head_(int(param_int(p, "HEAD"))) {
    const AttentionSize& z = s_.size;
    const int n_rows = int(param_int(p, "ROWS"));
    for (int r = 0; r < n_rows; ++r)
      rows_.push_back(n_rows == 1 ? 0 : int(int64_t(r) * (z.shape.n_q - 1) / (n_rows - 1)));
    const AttentionInputs in = random_attention_inputs(z, seed, false);
    q_ = s_.upload(b, in.q), k_ = s_.upload(b, in.k);
    // L from the reference forward (V does not matter to it).
    lse_ = b.upload_vector(
        to_float(attention_forward_reference(q_.values(), k_.values(), to_double(in.v), z.shape).lse));
    rows_buf_ = b.upload_vector(rows_);
    out_ = output_array<float>(rows_.size() * size_t(z.shape.n_k));
  }
  void launch() override {
    s_.op.probs(q_.ptr(), k_.ptr(), lse_.as<const float>(), rows_buf_.as<const int>(), int(rows_.size()),
                head_, s_.size.problem(), out_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const AttentionShape& s = s_.size.shape;
    return {make_check("P", {rows_.size(), size_t(s.n_k)}, fetch<float>(out_, rows_.size() * size_t(s.n_k)),
                       attention_probs_reference(q_.values(), k_.values(), s, head_, rows_),
                       tol.value_or(Tolerance{1e-5, 1e-5}))};
  }
  WorkCounts work() const override {
    const double r = double(rows_.size()), nk = s_.size.shape.n_k, d = s_.size.shape.head_dim;
    return {4.0 * (r * d + nk * d + r + r * nk), 2.0 * r * nk * d};
  }

 private:
  AttentionSetup<Float32> s_;
  int head_;
  std::vector<int> rows_;
  AttentionTensor<float> q_, k_;
  DeviceBuffer lse_, rows_buf_, out_;
};

// A runner of flash_attn2.cu: every variant compiles every kernel of the variant.
KernelSpec fa2_spec(const char* name, const char* description) {
  using K = ParamSpec::Kind;
  KernelSpec spec{
      .name = name,
      .family = "attention",
      .description = description,
      .source = kFlashAttn2Source,
      .variants = {{"tiled", "FA2 partitioning: CTA per block of rows, K/V tiles through shared memory"},
                   {"row_per_cta", "the seed's design: one CTA per (batch_head, row)"}},
      .params = attention_param_specs(
          {"HEAD_DIM", K::Int, "64", "head dimension: a power of two in [16, 256]", 16, 256, true}),
      .compile = [](const std::string& variant, const Params& p) {
        return fa2_compile_request(variant, int(param_int(p, "HEAD_DIM")), fa2_blocks(p));
      }};
  spec.params.push_back({.name = "BLOCK_M",
                         .kind = K::Choice,
                         .default_value = "auto",
                         .help = "tiled: rows per CTA (auto: by problem size)",
                         .choices = {"auto", "16", "32", "64"}});
  return spec;
}

const KernelSpec forward_spec = fa2_spec(
    "flash_attn2_fwd", "Flash Attention 2 forward: Q,K,V [BH,N,D] -> O [BH,Nq,D], logsumexp L [BH,Nq]");
// A backward runner: fa2_spec with OL.
KernelSpec fa2_backward_spec(const char* name, const char* description) {
  KernelSpec spec = fa2_spec(name, description);
  spec.params.push_back(forward_outputs_param());
  return spec;
}

const KernelSpec backward_spec = fa2_backward_spec(
    "flash_attn2_bwd", "Flash Attention 2 backward: preprocess D = rowsum(dO*O), dQ kernel, dK/dV kernel");
const KernelSpec dq_spec = fa2_backward_spec(
    "flash_attn2_bwd_dq",
    "Flash Attention 2 backward, the dQ kernel alone (forward and D = rowsum(dO*O) in set-up)");
const KernelSpec dkdv_spec = fa2_backward_spec(
    "flash_attn2_bwd_dkdv",
    "Flash Attention 2 backward, the dK/dV kernel alone (forward and D = rowsum(dO*O) in set-up)");

const KernelSpec probs_spec = [] {
  using K = ParamSpec::Kind;
  KernelSpec spec = fa2_spec(
      "attn_probs", "attention probabilities of one head for chosen query rows, from the saved logsumexp");
  spec.params.push_back({"HEAD", K::Int, "0", "which batch*head (< BH)", 0, 65535});
  spec.params.push_back({"ROWS", K::Int, "8", "query rows shown, spread evenly (<= N_CTX_Q)", 1, 4096});
  spec.validate = [](const Params& p) {
    if (param_int(p, "HEAD") >= param_int(p, "BH"))
      throw UsageError("parameter HEAD=" + p.at("HEAD") + " of attn_probs is invalid: must be < BH (" +
                       p.at("BH") + ")");
    if (param_int(p, "ROWS") > param_int(p, "N_CTX_Q"))
      throw UsageError("parameter ROWS=" + p.at("ROWS") + " of attn_probs is invalid: must be <= N_CTX_Q (" +
                       p.at("N_CTX_Q") + ")");
  };
  return spec;
}();

const bool registered =
    register_runner(forward_spec, make_instance<AttentionForwardInstance<Float32>>()) &&
    register_runner(backward_spec, make_instance<AttentionBackwardInstance<Float32>>()) &&
    register_runner(dq_spec, make_instance<AttentionGradientKernelInstance<Float32, GradientKernel::dq>>()) &&
    register_runner(dkdv_spec,
                    make_instance<AttentionGradientKernelInstance<Float32, GradientKernel::dkdv>>()) &&
    register_runner(probs_spec, make_instance<ProbsInstance>());

}  // namespace
}  // namespace lab
