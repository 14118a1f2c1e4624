// Runners flash_attn2_fwd, flash_attn2_bwd and attn_probs: seeded random Q, K, V (and dO), every variant of
// flash_attn2.cu checked element by element against the float64 reference in attention_reference.cpp.
#include "kernels/attention/attention_runner_support.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> fa2_param_specs() {
  using K = ParamSpec::Kind;
  auto specs = attention_param_specs(
      {"HEAD_DIM", K::Int, "64", "head dimension: a power of two in [16, 128]", 16, 128, true});
  ParamSpec block{"BLOCK_M", K::Choice, "auto", "tiled: rows per CTA (auto: by problem size)"};
  block.choices = {"auto", "16", "32", "64"};
  specs.push_back(block);
  return specs;
}

std::vector<KernelVariant> attention_variants() {
  return {{"tiled", "FA2 partitioning: CTA per block of rows, K/V tiles through shared memory"},
          {"row_per_cta", "the seed's design: one CTA per (batch_head, row)"}};
}

// The problem and the rows per CTA of the tiled kernels.
struct AttentionConfig : AttentionSize {
  Fa2Blocks blocks;

  explicit AttentionConfig(const Params& p) : AttentionSize(p) {
    blocks = choose_fa2_blocks(shape.batch_heads, shape.n_q, shape.n_k, shape.head_dim);
    if (param_str(p, "BLOCK_M") != "auto") {
      const int m = int(param_int(p, "BLOCK_M"));
      blocks = {m, m, m};
    }
  }
};

class AttentionRunnerBase : public Runner {
 public:
  std::string family() const override { return "attention"; }
  std::string source_path() const override { return kFlashAttn2Source; }
  std::vector<KernelVariant> variants() const override { return attention_variants(); }
  std::vector<ParamSpec> params() const override { return fa2_param_specs(); }
  CompileRequest compile_request(const std::string& variant, const Params& p) const override {
    AttentionConfig c(p);
    return fa2_compile_request(variant, c.shape.head_dim, c.blocks);
  }
};

// ---- forward ---------------------------------------------------------------------------------------------

class ForwardInstance : public Instance {
 public:
  ForwardInstance(Backend& b, const std::string& variant, const AttentionConfig& c, uint64_t seed)
      : b_(b),
        c_(c),
        op_(b, variant, c.shape.head_dim, c.blocks),
        in_(random_attention_inputs(c, seed, false)) {
    dq_ = b.upload_vector(in_.q), dk_ = b.upload_vector(in_.k), dv_ = b.upload_vector(in_.v);
    do_ = b.alloc_array<float>(c.q_elems());
    dl_ = b.alloc_array<float>(c.rows());
    poison();
  }
  void poison() override { poison_all(b_, {&do_, &dl_}); }
  void launch() override {
    op_.forward(dq_.as<const float>(), dk_.as<const float>(), dv_.as<const float>(), do_.as<float>(),
                dl_.as<float>(), c_.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.o.empty())
      ref_ = attention_forward_reference(to_double(in_.q), to_double(in_.k), to_double(in_.v), c_.shape);
    // O: float32 sums of Nk products; L ~ log(Nk) + max score, rounded at ~1e-7 relative.
    return {make_check("O", c_.q_dims(), b_.download_vector<float>(do_, c_.q_elems()), ref_.o,
                       tol.value_or(Tolerance{1e-5, 1e-4}), keep_for_viewer(c_.q_elems())),
            make_check("L", c_.row_dims(), b_.download_vector<float>(dl_, c_.rows()), ref_.lse,
                       tol.value_or(Tolerance{1e-5, 1e-4}), keep_for_viewer(c_.rows()))};
  }
  WorkCounts work() const override {
    return {4.0 * (2 * c_.q_elems() + 2 * c_.k_elems() + c_.rows()), c_.forward_flops()};
  }

 private:
  Backend& b_;
  AttentionConfig c_;
  FlashAttn2Op op_;
  AttentionInputs in_;
  DeviceBuffer dq_, dk_, dv_, do_, dl_;
  AttentionForwardRef ref_;
};

class ForwardRunner : public AttentionRunnerBase {
 public:
  std::string name() const override { return "flash_attn2_fwd"; }
  std::string description() const override {
    return "Flash Attention 2 forward: Q,K,V [BH,N,D] -> O [BH,Nq,D], logsumexp L [BH,Nq]";
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<ForwardInstance>(b, variant, AttentionConfig(p), seed);
  }
};

// ---- backward --------------------------------------------------------------------------------------------

// O and L come from the float64 reference (rounded to float), so the backward is checked on its own.
class BackwardInstance : public Instance {
 public:
  BackwardInstance(Backend& b, const std::string& variant, const AttentionConfig& c, uint64_t seed)
      : b_(b),
        c_(c),
        op_(b, variant, c.shape.head_dim, c.blocks),
        in_(random_attention_inputs(c, seed, true)) {
    const auto fwd =
        attention_forward_reference(to_double(in_.q), to_double(in_.k), to_double(in_.v), c.shape);
    q_buf_ = b.upload_vector(in_.q), k_buf_ = b.upload_vector(in_.k), v_buf_ = b.upload_vector(in_.v);
    o_buf_ = b.upload_vector(to_float(fwd.o)), lse_buf_ = b.upload_vector(to_float(fwd.lse));
    do_buf_ = b.upload_vector(in_.d_o);
    delta_ = b.alloc_array<float>(c.rows());
    dq_ = b.alloc_array<float>(c.q_elems());
    dk_ = b.alloc_array<float>(c.k_elems());
    dv_ = b.alloc_array<float>(c.k_elems());
    poison();
  }
  void poison() override { poison_all(b_, {&delta_, &dq_, &dk_, &dv_}); }
  void launch() override {
    op_.backward(q_buf_.as<const float>(), k_buf_.as<const float>(), v_buf_.as<const float>(),
                 o_buf_.as<const float>(), do_buf_.as<const float>(), lse_buf_.as<const float>(),
                 delta_.as<float>(), dq_.as<float>(), dk_.as<float>(), dv_.as<float>(), c_.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.dq.empty())
      ref_ = attention_backward_reference(to_double(in_.q), to_double(in_.k), to_double(in_.v),
                                          to_double(in_.d_o), c_.shape);
    // Gradients sum Nq (dK, dV) or Nk (dQ) float32 terms of both signs: relative error a few 1e-7 per term
    // growth, still far under 1e-5; max_abs scaled to their magnitude (up to ~10 at N = 4096).
    const Tolerance t = tol.value_or(Tolerance{1e-5, 1e-3});
    const bool keep = keep_for_viewer(c_.q_elems() + c_.k_elems());
    return {make_check("dQ", c_.q_dims(), b_.download_vector<float>(dq_, c_.q_elems()), ref_.dq, t, keep),
            make_check("dK", c_.k_dims(), b_.download_vector<float>(dk_, c_.k_elems()), ref_.dk, t, keep),
            make_check("dV", c_.k_dims(), b_.download_vector<float>(dv_, c_.k_elems()), ref_.dv, t, keep)};
  }
  WorkCounts work() const override {
    // Reads Q, K, V, O, dO, L (twice: dQ and dK/dV kernels), writes dQ, dK, dV and D.
    const double bytes = 4.0 * (2 * (3 * c_.q_elems() + 2 * c_.k_elems() + c_.rows()) + c_.q_elems() +
                                2 * c_.k_elems() + c_.rows());
    return {bytes, 2.5 * c_.forward_flops()};
  }

 private:
  Backend& b_;
  AttentionConfig c_;
  FlashAttn2Op op_;
  AttentionInputs in_;
  DeviceBuffer q_buf_, k_buf_, v_buf_, o_buf_, lse_buf_, do_buf_, delta_, dq_, dk_, dv_;
  AttentionGradsRef ref_;
};

class BackwardRunner : public AttentionRunnerBase {
 public:
  std::string name() const override { return "flash_attn2_bwd"; }
  std::string description() const override {
    return "Flash Attention 2 backward: preprocess D = rowsum(dO*O), dQ kernel, dK/dV kernel";
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<BackwardInstance>(b, variant, AttentionConfig(p), seed);
  }
};

// ---- attention probabilities -----------------------------------------------------------------------------

class ProbsInstance : public Instance {
 public:
  ProbsInstance(Backend& b, const std::string& variant, const AttentionConfig& c, int head, int n_rows,
                uint64_t seed)
      : b_(b),
        c_(c),
        op_(b, variant, c.shape.head_dim, c.blocks),
        head_(head),
        in_(random_attention_inputs(c, seed, false)) {
    // Rows spread evenly over the queries, first and last included.
    for (int r = 0; r < n_rows; ++r)
      rows_.push_back(n_rows == 1 ? 0 : int(int64_t(r) * (c.shape.n_q - 1) / (n_rows - 1)));
    // L from the reference forward (V does not matter to it).
    const auto fwd =
        attention_forward_reference(to_double(in_.q), to_double(in_.k), to_double(in_.v), c.shape);
    q_buf_ = b.upload_vector(in_.q), k_buf_ = b.upload_vector(in_.k);
    lse_buf_ = b.upload_vector(to_float(fwd.lse));
    rows_buf_ = b.upload_vector(rows_);
    out_ = b.alloc_array<float>(rows_.size() * size_t(c.shape.n_k));
    poison();
  }
  void poison() override { poison_all(b_, {&out_}); }
  void launch() override {
    op_.probs(q_buf_.as<const float>(), k_buf_.as<const float>(), lse_buf_.as<const float>(),
              rows_buf_.as<const int>(), int(rows_.size()), head_, c_.problem(), out_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    const size_t n = rows_.size() * size_t(c_.shape.n_k);
    return {make_check("P", {rows_.size(), size_t(c_.shape.n_k)}, b_.download_vector<float>(out_, n),
                       attention_probs_reference(to_double(in_.q), to_double(in_.k), c_.shape, head_, rows_),
                       tol.value_or(Tolerance{1e-5, 1e-5}))};
  }
  WorkCounts work() const override {
    const double r = double(rows_.size()), nk = c_.shape.n_k, d = c_.shape.head_dim;
    return {4.0 * (r * d + nk * d + r + r * nk), 2.0 * r * nk * d};
  }

 private:
  Backend& b_;
  AttentionConfig c_;
  FlashAttn2Op op_;
  int head_;
  AttentionInputs in_;
  std::vector<int> rows_;
  DeviceBuffer q_buf_, k_buf_, lse_buf_, rows_buf_, out_;
};

class ProbsRunner : public AttentionRunnerBase {
 public:
  std::string name() const override { return "attn_probs"; }
  std::string description() const override {
    return "attention probabilities of one head for chosen query rows, from the saved logsumexp";
  }
  std::vector<ParamSpec> params() const override {
    using K = ParamSpec::Kind;
    auto specs = fa2_param_specs();
    specs.push_back({"HEAD", K::Int, "0", "which batch*head (< BH)", 0, 65535});
    specs.push_back({"ROWS", K::Int, "8", "query rows shown, spread evenly (<= N_CTX_Q)", 1, 4096});
    return specs;
  }
  void validate(const Params& p) const override {
    if (param_int(p, "HEAD") >= param_int(p, "BH"))
      throw UsageError("parameter HEAD=" + p.at("HEAD") + " of attn_probs is invalid: must be < BH (" +
                       p.at("BH") + ")");
    if (param_int(p, "ROWS") > param_int(p, "N_CTX_Q"))
      throw UsageError("parameter ROWS=" + p.at("ROWS") + " of attn_probs is invalid: must be <= N_CTX_Q (" +
                       p.at("N_CTX_Q") + ")");
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<ProbsInstance>(b, variant, AttentionConfig(p), int(param_int(p, "HEAD")),
                                           int(param_int(p, "ROWS")), seed);
  }
};

RunnerRegistration<ForwardRunner> forward_registration;
RunnerRegistration<BackwardRunner> backward_registration;
RunnerRegistration<ProbsRunner> probs_registration;

}  // namespace
}  // namespace lab
