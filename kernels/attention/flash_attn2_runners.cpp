// Runners flash_attn2_fwd, flash_attn2_bwd and attn_probs: seeded random Q, K, V (and dO), every variant of
// flash_attn2.cu checked element by element against the float64 reference in attention_reference.cpp.
#include <cmath>

#include "attention/attention_reference.hpp"
#include "attention/flash_attn2_op.hpp"
#include "runner.hpp"

namespace lab {
namespace {

// Scores spread wide enough (|q|, |k| up to 2) that the softmax is far from uniform.
constexpr float kQkRange = 2.0f;

std::vector<ParamSpec> attention_param_specs() {
  using K = ParamSpec::Kind;
  ParamSpec head_dim{"HEAD_DIM", K::Int, "64", "head dimension: a power of two in [16, 128]", 16, 128, true};
  ParamSpec block{"BLOCK_M", K::Choice, "auto", "tiled: rows per CTA (auto: by problem size)"};
  block.choices = {"auto", "16", "32", "64"};
  return {{"BH", K::Int, "2", "batch * heads", 1, 65536},
          {"N_CTX_Q", K::Int, "400", "query rows per head", 1, 1 << 20},
          {"N_CTX_K", K::Int, "400", "key / value rows per head", 1, 1 << 20},
          head_dim,
          {"SCALE", K::Float, "0", "softmax scale; 0 means 1/sqrt(HEAD_DIM)", 0, 1e6},
          block};
}

std::vector<KernelVariant> attention_variants() {
  return {{"tiled", "FA2 partitioning: CTA per block of rows, K/V tiles through shared memory"},
          {"row_per_cta", "the seed's design: one CTA per (batch_head, row)"}};
}

// Resolved parameters of one attention problem.
struct AttentionConfig {
  AttentionShape shape;
  Fa2Blocks blocks;

  explicit AttentionConfig(const Params& p) {
    shape.batch_heads = int(param_int(p, "BH"));
    shape.n_q = int(param_int(p, "N_CTX_Q"));
    shape.n_k = int(param_int(p, "N_CTX_K"));
    shape.head_dim = int(param_int(p, "HEAD_DIM"));
    const double scale = param_float(p, "SCALE");
    shape.scale = double(float(scale != 0 ? scale : 1.0 / std::sqrt(double(shape.head_dim))));
    blocks = choose_fa2_blocks(shape.batch_heads, shape.n_q, shape.n_k, shape.head_dim);
    if (param_str(p, "BLOCK_M") != "auto") {
      const int m = int(param_int(p, "BLOCK_M"));
      blocks = {m, m, m};
    }
  }
  AttentionProblem problem() const { return {shape.batch_heads, shape.n_q, shape.n_k, float(shape.scale)}; }
  size_t q_elems() const { return size_t(shape.batch_heads) * shape.n_q * shape.head_dim; }
  size_t k_elems() const { return size_t(shape.batch_heads) * shape.n_k * shape.head_dim; }
  size_t rows() const { return size_t(shape.batch_heads) * shape.n_q; }
  double forward_flops() const {
    return 4.0 * shape.batch_heads * shape.n_q * double(shape.n_k) * shape.head_dim;
  }
};

void poison_all(Backend& b, std::initializer_list<const DeviceBuffer*> buffers) {
  for (auto* buf : buffers) b.fill_bytes(buf->get(), 0xff, buf->bytes());  // all-ones bytes = NaN
}

class AttentionRunnerBase : public Runner {
 public:
  std::string family() const override { return "attention"; }
  std::string source_path() const override { return kFlashAttn2Source; }
  std::vector<KernelVariant> variants() const override { return attention_variants(); }
  std::vector<ParamSpec> params() const override { return attention_param_specs(); }
  CompileRequest compile_request(const std::string& variant, const Params& p) const override {
    AttentionConfig c(p);
    return fa2_compile_request(variant, c.shape.head_dim, c.blocks);
  }
};

// ---- forward ---------------------------------------------------------------------------------------------

class ForwardInstance : public Instance {
 public:
  ForwardInstance(Backend& b, const std::string& variant, const AttentionConfig& c, uint64_t seed)
      : b_(b), c_(c), op_(b, variant, c.shape.head_dim, c.blocks) {
    q_ = random_uniform(c.q_elems(), -kQkRange, kQkRange, derive_seed(seed, "q"));
    k_ = random_uniform(c.k_elems(), -kQkRange, kQkRange, derive_seed(seed, "k"));
    v_ = random_uniform(c.k_elems(), -1.f, 1.f, derive_seed(seed, "v"));
    dq_ = b.upload_vector(q_), dk_ = b.upload_vector(k_), dv_ = b.upload_vector(v_);
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
      ref_ = attention_forward_reference(to_double(q_), to_double(k_), to_double(v_), c_.shape);
    const auto& s = c_.shape;
    const size_t bh = size_t(s.batch_heads), nq = size_t(s.n_q), d = size_t(s.head_dim);
    // O: float32 sums of Nk products; L ~ log(Nk) + max score, rounded at ~1e-7 relative.
    return {make_check("O", {bh, nq, d}, b_.download_vector<float>(do_, c_.q_elems()), ref_.o,
                       tol.value_or(Tolerance{1e-5, 1e-4}), c_.q_elems() <= (1u << 20)),
            make_check("L", {bh, nq}, b_.download_vector<float>(dl_, c_.rows()), ref_.lse,
                       tol.value_or(Tolerance{1e-5, 1e-4}), c_.rows() <= (1u << 20))};
  }
  WorkCounts work() const override {
    return {4.0 * (2 * c_.q_elems() + 2 * c_.k_elems() + c_.rows()), c_.forward_flops()};
  }

 private:
  Backend& b_;
  AttentionConfig c_;
  FlashAttn2Op op_;
  std::vector<float> q_, k_, v_;
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
      : b_(b), c_(c), op_(b, variant, c.shape.head_dim, c.blocks) {
    q_ = random_uniform(c.q_elems(), -kQkRange, kQkRange, derive_seed(seed, "q"));
    k_ = random_uniform(c.k_elems(), -kQkRange, kQkRange, derive_seed(seed, "k"));
    v_ = random_uniform(c.k_elems(), -1.f, 1.f, derive_seed(seed, "v"));
    d_o_ = random_uniform(c.q_elems(), -1.f, 1.f, derive_seed(seed, "dO"));
    const auto fwd = attention_forward_reference(to_double(q_), to_double(k_), to_double(v_), c.shape);
    q_buf_ = b.upload_vector(q_), k_buf_ = b.upload_vector(k_), v_buf_ = b.upload_vector(v_);
    o_buf_ = b.upload_vector(to_float(fwd.o)), lse_buf_ = b.upload_vector(to_float(fwd.lse));
    do_buf_ = b.upload_vector(d_o_);
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
      ref_ = attention_backward_reference(to_double(q_), to_double(k_), to_double(v_), to_double(d_o_),
                                          c_.shape);
    const auto& s = c_.shape;
    const size_t bh = size_t(s.batch_heads), d = size_t(s.head_dim);
    // Gradients sum Nq (dK, dV) or Nk (dQ) float32 terms of both signs: relative error a few 1e-7 per term
    // growth, still far under 1e-5; max_abs scaled to their magnitude (up to ~10 at N = 4096).
    const Tolerance t = tol.value_or(Tolerance{1e-5, 1e-3});
    const bool keep = c_.q_elems() + c_.k_elems() <= (1u << 20);
    return {make_check("dQ", {bh, size_t(s.n_q), d}, b_.download_vector<float>(dq_, c_.q_elems()), ref_.dq, t,
                       keep),
            make_check("dK", {bh, size_t(s.n_k), d}, b_.download_vector<float>(dk_, c_.k_elems()), ref_.dk, t,
                       keep),
            make_check("dV", {bh, size_t(s.n_k), d}, b_.download_vector<float>(dv_, c_.k_elems()), ref_.dv, t,
                       keep)};
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
  std::vector<float> q_, k_, v_, d_o_;
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
      : b_(b), c_(c), op_(b, variant, c.shape.head_dim, c.blocks), head_(head) {
    q_ = random_uniform(c.q_elems(), -kQkRange, kQkRange, derive_seed(seed, "q"));
    k_ = random_uniform(c.k_elems(), -kQkRange, kQkRange, derive_seed(seed, "k"));
    // Rows spread evenly over the queries, first and last included.
    for (int r = 0; r < n_rows; ++r)
      rows_.push_back(n_rows == 1 ? 0 : int(int64_t(r) * (c.shape.n_q - 1) / (n_rows - 1)));
    // L from the reference forward (V does not matter to it).
    const auto fwd = attention_forward_reference(to_double(q_), to_double(k_),
                                                 std::vector<double>(c.k_elems(), 0.0), c.shape);
    q_buf_ = b.upload_vector(q_), k_buf_ = b.upload_vector(k_), lse_buf_ = b.upload_vector(to_float(fwd.lse));
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
                       attention_probs_reference(to_double(q_), to_double(k_), c_.shape, head_, rows_),
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
  std::vector<float> q_, k_;
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
    auto specs = attention_param_specs();
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
