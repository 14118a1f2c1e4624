// Runners of the PSA kernels: psa_pack_qkv, psa_extract_v, psa_merge_attn (pure rearrangements, exact), and
// psa_attention / psa_attention_bwd (the composed op, checked against the Ultralytics formula in float64).
#include <cmath>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/psa_op.hpp"
#include "kernels/attention/psa_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> psa_param_specs() {
  using K = ParamSpec::Kind;
  return {{"B", K::Int, "1", "batch size", 1, 1024},
          {"NUM_HEADS", K::Int, "2", "attention heads", 1, 64},
          {"KEY_DIM", K::Int, "32", "key dim (= HEAD_DIM of each FA2 pass): a power of two in [16, 128]", 16,
           128, true},
          {"H", K::Int, "20", "feature map height", 1, 1024},
          {"W", K::Int, "20", "feature map width", 1, 1024},
          {"SCALE", K::Float, "0", "softmax scale; 0 means KEY_DIM ** -0.5", 0, 1e6}};
}

PsaShape psa_shape(const Params& p) {
  PsaShape s;
  s.batch = int(param_int(p, "B"));
  s.num_heads = int(param_int(p, "NUM_HEADS"));
  s.key_dim = int(param_int(p, "KEY_DIM"));
  s.height = int(param_int(p, "H"));
  s.width = int(param_int(p, "W"));
  const double scale = param_float(p, "SCALE");
  s.scale = double(float(scale != 0 ? scale : 1.0 / std::sqrt(double(s.key_dim))));
  return s;
}

PsaDims psa_dims(const PsaShape& s) {
  return {s.batch, s.num_heads, s.key_dim, s.n(), float(s.scale)};
}

size_t qkv_elems(const PsaShape& s) {
  return size_t(s.batch) * s.qkv_channels() * s.n();
}
size_t out_elems(const PsaShape& s) {
  return size_t(s.batch) * s.out_channels() * s.n();
}
size_t head_elems(const PsaShape& s) {
  return size_t(s.batch_heads()) * s.n() * s.key_dim;
}
std::vector<size_t> nchw(const PsaShape& s, int channels) {
  return {size_t(s.batch), size_t(channels), size_t(s.height), size_t(s.width)};
}

void poison_buffer(Backend& b, const DeviceBuffer& buf) {
  b.fill_bytes(buf.get(), 0xff, buf.bytes());
}

// A rearrangement is exact: any difference at all is a bug.
constexpr Tolerance kExact{0.0, 0.0};

class PsaRunnerBase : public Runner {
 public:
  std::string family() const override { return "attention"; }
  std::string source_path() const override { return kPsaSource; }
  std::vector<ParamSpec> params() const override { return psa_param_specs(); }
};

// One psa.cu rearrangement kernel: input(s) random, one output, compared with its reference exactly.
class RearrangeInstance : public Instance {
 public:
  enum class Kind { Pack, ExtractV, Merge };
  RearrangeInstance(Backend& b, Kind kind, const PsaShape& s, uint64_t seed)
      : b_(b), kind_(kind), s_(s), op_(b, "tiled", psa_dims(s)) {
    if (kind == Kind::Merge) {
      in_a_ = random_uniform(head_elems(s), -1.f, 1.f, derive_seed(seed, "o_lo"));
      in_b_ = random_uniform(head_elems(s), -1.f, 1.f, derive_seed(seed, "o_hi"));
      buf_b_ = b.upload_vector(in_b_);
    } else {
      in_a_ = random_uniform(qkv_elems(s), -1.f, 1.f, derive_seed(seed, "qkv"));
    }
    buf_a_ = b.upload_vector(in_a_);
    out_ = b.alloc_array<float>(out_count());
    poison();
  }
  void poison() override { poison_buffer(b_, out_); }
  void launch() override {
    switch (kind_) {
      case Kind::Pack:
        op_.pack_qkv(buf_a_.as<const float>(), out_.as<float>());
        break;
      case Kind::ExtractV:
        op_.extract_v(buf_a_.as<const float>(), out_.as<float>());
        break;
      case Kind::Merge:
        op_.merge_attn(buf_a_.as<const float>(), buf_b_.as<const float>(), out_.as<float>());
        break;
    }
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    auto out = b_.download_vector<float>(out_, out_count());
    switch (kind_) {
      case Kind::Pack:
        return {make_check("packed", {4, size_t(s_.batch_heads()), size_t(s_.n()), size_t(s_.key_dim)}, out,
                           psa_pack_reference(to_double(in_a_), s_), tol.value_or(kExact))};
      case Kind::ExtractV:
        return {make_check("v", nchw(s_, s_.out_channels()), out,
                           psa_extract_v_reference(to_double(in_a_), s_), tol.value_or(kExact))};
      case Kind::Merge:
        return {make_check("merged", nchw(s_, s_.out_channels()), out,
                           psa_merge_reference(to_double(in_a_), to_double(in_b_), s_),
                           tol.value_or(kExact))};
    }
    return {};
  }
  WorkCounts work() const override {
    const double moved = kind_ == Kind::Pack ? 2.0 * qkv_elems(s_) : 2.0 * out_elems(s_);
    return {4.0 * moved, 0.0};
  }

 private:
  size_t out_count() const { return kind_ == Kind::Pack ? qkv_elems(s_) : out_elems(s_); }
  Backend& b_;
  Kind kind_;
  PsaShape s_;
  PsaOp op_;
  std::vector<float> in_a_, in_b_;
  DeviceBuffer buf_a_, buf_b_, out_;
};

template <RearrangeInstance::Kind K>
class RearrangeRunner : public PsaRunnerBase {
 public:
  std::string name() const override {
    return K == RearrangeInstance::Kind::Pack       ? "psa_pack_qkv"
           : K == RearrangeInstance::Kind::ExtractV ? "psa_extract_v"
                                                    : "psa_merge_attn";
  }
  std::string description() const override {
    return K == RearrangeInstance::Kind::Pack
               ? "qkv NCHW [B, nh*4*KD, H, W] -> [4, BH, N, KD] (Q, K, V_lo, V_hi)"
           : K == RearrangeInstance::Kind::ExtractV
               ? "qkv NCHW -> the V channels [B, nh*2*KD, H, W] (input of the pe conv)"
               : "two FA2 outputs [BH, N, KD] (lo, hi) -> NCHW [B, nh*2*KD, H, W]";
  }
  std::vector<KernelVariant> variants() const override {
    return {{"v1", "32x33 shared tile transpose (extract-V: a channel gather)"}};
  }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kPsaSource, {}, {name()}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<RearrangeInstance>(b, K, psa_shape(p), seed);
  }
};

// ---- composed PSA attention ------------------------------------------------------------------------------

class ComposedRunnerBase : public PsaRunnerBase {
 public:
  std::vector<KernelVariant> variants() const override {
    return {{"tiled", "pack -> 2x FA2 (tiled) -> merge, + extract-V"},
            {"row_per_cta", "pack -> 2x FA2 (row_per_cta) -> merge, + extract-V"},
            {"fused",
             "one launch: 8 query rows per CTA, the keys split over its 8 warps, both value halves on "
             "shared scores (KEY_DIM 16, 32); the backward on tiled FA2"}};
  }
  // The attention kernels (the fused forward kernel for `fused`); the instance also compiles psa.cu.
  CompileRequest compile_request(const std::string& variant, const Params& p) const override {
    const PsaShape s = psa_shape(p);
    if (variant == "fused") return psa_fused_compile_request(s.key_dim);
    return fa2_compile_request(variant, s.key_dim,
                               choose_fa2_blocks(s.batch_heads(), s.n(), s.n(), s.key_dim));
  }
};

class PsaForwardInstance : public Instance {
 public:
  PsaForwardInstance(Backend& b, const std::string& variant, const PsaShape& s, uint64_t seed)
      : b_(b), s_(s), op_(b, variant, psa_dims(s)), ws_(op_.workspace()) {
    qkv_ = random_uniform(qkv_elems(s), -2.f, 2.f, derive_seed(seed, "qkv"));
    qkv_buf_ = b.upload_vector(qkv_);
    x_ = b.alloc_array<float>(out_elems(s));
    v_ = b.alloc_array<float>(out_elems(s));
    poison();
  }
  void poison() override {
    for (auto* buf : {&x_, &v_, &ws_.lse}) poison_buffer(b_, *buf);
  }
  void launch() override { op_.forward(qkv_buf_.as<const float>(), x_.as<float>(), v_.as<float>(), ws_); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.x.empty()) ref_ = psa_attention_reference(to_double(qkv_), s_);
    const Tolerance t = tol.value_or(Tolerance{1e-5, 1e-4});
    const size_t rows = size_t(s_.batch_heads()) * s_.n();
    return {
        make_check("x", nchw(s_, s_.out_channels()), b_.download_vector<float>(x_, out_elems(s_)), ref_.x, t),
        make_check("v", nchw(s_, s_.out_channels()), b_.download_vector<float>(v_, out_elems(s_)), ref_.v,
                   tol.value_or(kExact)),
        make_check("L", {size_t(s_.batch_heads()), size_t(s_.n())}, b_.download_vector<float>(ws_.lse, rows),
                   ref_.lse, t)};
  }
  WorkCounts work() const override {
    const double n = s_.n();
    // Two FA2 passes at HEAD_DIM = KD; bytes: qkv read twice (pack, extract), packed written and read,
    // O_lo/O_hi written and read, x and v written.
    return {4.0 * (2 * qkv_elems(s_) + 2 * 4 * head_elems(s_) + 4 * head_elems(s_) + 2 * out_elems(s_)),
            2 * 4.0 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  Backend& b_;
  PsaShape s_;
  PsaOp op_;
  PsaWorkspace ws_;
  std::vector<float> qkv_;
  DeviceBuffer qkv_buf_, x_, v_;
  PsaAttentionRef ref_;
};

class PsaForwardRunner : public ComposedRunnerBase {
 public:
  std::string name() const override { return "psa_attention"; }
  std::string description() const override {
    return "PSA attention forward: pack -> FA2 on V_lo, V_hi (shared Q, K, L) -> merge, + extract-V";
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<PsaForwardInstance>(b, variant, psa_shape(p), seed);
  }
};

// The forward runs once at setup; `launch` is the backward: merge backward, 2x FA2 backward, d_qkv assembly.
class PsaBackwardInstance : public Instance {
 public:
  PsaBackwardInstance(Backend& b, const std::string& variant, const PsaShape& s, uint64_t seed)
      : b_(b), s_(s), op_(b, variant, psa_dims(s)), ws_(op_.workspace()) {
    qkv_ = random_uniform(qkv_elems(s), -2.f, 2.f, derive_seed(seed, "qkv"));
    g_x_ = random_uniform(out_elems(s), -1.f, 1.f, derive_seed(seed, "g_x"));
    g_v_ = random_uniform(out_elems(s), -1.f, 1.f, derive_seed(seed, "g_v"));
    qkv_buf_ = b.upload_vector(qkv_);
    g_x_buf_ = b.upload_vector(g_x_);
    g_v_buf_ = b.upload_vector(g_v_);
    DeviceBuffer x = b.alloc_array<float>(out_elems(s)), v = b.alloc_array<float>(out_elems(s));
    op_.forward(qkv_buf_.as<const float>(), x.as<float>(), v.as<float>(), ws_);
    b.synchronize();
    d_qkv_ = b.alloc_array<float>(qkv_elems(s));
    poison();
  }
  void poison() override {
    for (auto* buf : {&d_qkv_, &ws_.grads, &ws_.do_lo, &ws_.do_hi, &ws_.delta}) poison_buffer(b_, *buf);
  }
  void launch() override {
    op_.backward(g_x_buf_.as<const float>(), g_v_buf_.as<const float>(), d_qkv_.as<float>(), ws_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.empty())
      ref_ = psa_attention_backward_reference(to_double(qkv_), to_double(g_x_), to_double(g_v_), s_);
    // As flash_attn2_bwd, with dQ and dK summed over two passes.
    return {make_check("d_qkv", nchw(s_, s_.qkv_channels()), b_.download_vector<float>(d_qkv_, qkv_elems(s_)),
                       ref_, tol.value_or(Tolerance{1e-5, 1e-3}))};
  }
  WorkCounts work() const override {
    const double n = s_.n();
    return {4.0 * (3 * out_elems(s_) + 2 * qkv_elems(s_) + 2 * 11 * head_elems(s_) + 6 * head_elems(s_)),
            2 * 2.5 * 4.0 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  Backend& b_;
  PsaShape s_;
  PsaOp op_;
  PsaWorkspace ws_;
  std::vector<float> qkv_, g_x_, g_v_;
  DeviceBuffer qkv_buf_, g_x_buf_, g_v_buf_, d_qkv_;
  std::vector<double> ref_;
};

class PsaBackwardRunner : public ComposedRunnerBase {
 public:
  std::string name() const override { return "psa_attention_bwd"; }
  std::string description() const override {
    return "PSA attention backward: merge bwd -> 2x FA2 bwd -> d_qkv (dQ, dK summed; + the extract-V "
           "gradient)";
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<PsaBackwardInstance>(b, variant, psa_shape(p), seed);
  }
};

RunnerRegistration<RearrangeRunner<RearrangeInstance::Kind::Pack>> pack_registration;
RunnerRegistration<RearrangeRunner<RearrangeInstance::Kind::ExtractV>> extract_registration;
RunnerRegistration<RearrangeRunner<RearrangeInstance::Kind::Merge>> merge_registration;
RunnerRegistration<PsaForwardRunner> forward_registration;
RunnerRegistration<PsaBackwardRunner> backward_registration;

}  // namespace
}  // namespace lab
