// Runners flash_attn2_fwd_half and flash_attn2_bwd_half: seeded random Q, K, V (and dO) rounded to fp16 or
// bf16, the tensor-core kernels of flash_attn2_mma.cu checked against the float64 reference on the rounded
// inputs, with tolerances in units of the element type's rounding.
#include <algorithm>
#include <cmath>

#include "kernels/attention/attention_runner_support.hpp"
#include "kernels/attention/flash_attn2_half_op.hpp"
#include "kernels/common/half_type.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> half_param_specs() {
  using K = ParamSpec::Kind;
  ParamSpec head_dim{"HEAD_DIM", K::Int, "64", "head dimension: 32, 64 or 128"};
  head_dim.choices = {"32", "64", "128"};
  auto specs = attention_param_specs(head_dim);
  ParamSpec dtype{"DTYPE", K::Choice, "f16", "16-bit element type of Q, K, V, O and the gradients"};
  dtype.choices = {"f16", "bf16"};
  specs.push_back(dtype);
  // Tile shapes, WARPSxMTxSTEP (flash_attn2_half_op.hpp); auto: the measured default for HEAD_DIM.
  const std::vector<std::string> shapes = {"auto",   "2x1x64", "4x1x32", "4x1x64", "4x1x128",
                                           "4x2x32", "4x2x64", "8x1x32", "8x1x64", "8x2x64"};
  for (const char* name : {"FWD_TILE", "DQ_TILE", "DKDV_TILE"}) {
    ParamSpec tile{name, K::Choice, "auto", "tile shape WARPSxMTxSTEP (MT 1 for dK/dV); auto: by HEAD_DIM"};
    tile.choices = shapes;
    specs.push_back(tile);
  }
  return specs;
}

// The kernel configuration of a variant ("mma", or "mma_fused_dq": dQ from the dK/dV kernel) and the *_TILE
// parameters, each defaulting to default_fa2_mma_config.
Fa2MmaConfig tile_config(const std::string& variant, const Params& p) {
  Fa2MmaConfig c = default_fa2_mma_config(int(param_int(p, "HEAD_DIM")));
  c.fused_dq = variant == "mma_fused_dq";
  const struct {
    const char* name;
    Fa2MmaTiles* tiles;
  } overrides[] = {{"FWD_TILE", &c.fwd}, {"DQ_TILE", &c.dq}, {"DKDV_TILE", &c.dkdv}};
  for (const auto& o : overrides)
    if (param_str(p, o.name) != "auto")
      *o.tiles =
          parse_fa2_mma_tiles(param_str(p, o.name), std::string("parameter ") + o.name, o.tiles == &c.dkdv);
  return c;
}

// The problem and its element type.
struct HalfConfig : AttentionSize {
  HalfType type;
  Fa2MmaConfig tiles;

  HalfConfig(const std::string& variant, const Params& p)
      : AttentionSize(p), type(parse_half_type(param_str(p, "DTYPE"))), tiles(tile_config(variant, p)) {}
  // The exact values of 16-bit patterns, for the reference.
  std::vector<double> values(const std::vector<uint16_t>& bits) const {
    return to_double(half_bits_to_float(bits, type));
  }
  std::vector<float> download(Backend& b, const DeviceBuffer& buf, size_t count) const {
    return half_bits_to_float(b.download_vector<uint16_t>(buf, count), type);
  }
};

// Half an ulp relative to the value: 2^-11 for fp16 (11-bit significand), 2^-8 for bf16 (8-bit).
double unit_roundoff(HalfType t) {
  return t == HalfType::f16 ? 0x1p-11 : 0x1p-8;
}

// rel_l2 of `rel_units` roundings; max_abs of `abs_units` roundings of the largest reference magnitude, plus
// 1e-5 for the float32 rounding of the O(1) intermediates (scores, dP - D): all the error there is where an
// output is zero (a single key makes dQ and dK vanish; the kernels leave ~2e-7 there).
Tolerance rounding_tolerance(HalfType t, double rel_units, double abs_units, const std::vector<double>& ref) {
  double largest = 0;
  for (double r : ref) largest = std::max(largest, std::abs(r));
  return {rel_units * unit_roundoff(t), abs_units * unit_roundoff(t) * largest + 1e-5};
}

// A float input rounded to the element type: the patterns the kernels read, kept for the reference.
struct HalfInput {
  std::vector<uint16_t> bits;
  DeviceBuffer buf;

  const uint16_t* ptr() const { return buf.as<const uint16_t>(); }
};

HalfInput upload_half(Backend& b, const std::vector<float>& values, HalfType t) {
  HalfInput in{to_half_bits(values, t), {}};
  in.buf = b.upload_vector(in.bits);
  return in;
}

KernelVariant mma_variant() {
  return {"mma", "mma.sync m16n8k16 tensor cores, float accumulation, cp.async staging"};
}

// ---- forward ---------------------------------------------------------------------------------------------

class HalfForwardInstance : public Instance {
 public:
  static constexpr const char* kName = "flash_attn2_fwd_half";
  static std::vector<KernelVariant> variants() { return {mma_variant()}; }
  static constexpr const char* kDescription = "Flash Attention 2 forward in fp16/bf16 on tensor cores";

  HalfForwardInstance(Backend& b, const HalfConfig& c, uint64_t seed)
      : b_(b), c_(c), op_(b, c.type, c.shape.head_dim, c.tiles) {
    const AttentionInputs in = random_attention_inputs(c, seed, false);
    q_ = upload_half(b, in.q, c.type), k_ = upload_half(b, in.k, c.type), v_ = upload_half(b, in.v, c.type);
    o_ = b.alloc_array<uint16_t>(c.q_elems());
    lse_ = b.alloc_array<float>(c.rows());
    poison();
  }
  void poison() override { poison_all(b_, {&o_, &lse_}); }
  void launch() override {
    op_.forward(q_.ptr(), k_.ptr(), v_.ptr(), o_.as<uint16_t>(), lse_.as<float>(), c_.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.o.empty())
      ref_ =
          attention_forward_reference(c_.values(q_.bits), c_.values(k_.bits), c_.values(v_.bits), c_.shape);
    // O: P is rounded to the element type before P.V and O once more at the end, each a relative rounding of
    // up to u (2^-11 fp16, 2^-8 bf16); the final one dominates (P's errors average out over Nk terms):
    // measured rel_l2 0.49u-0.57u and max_abs under 0.9u of max |O| (both types, HEAD_DIM 32-128, N up to
    // 4096, emulator and H200); 4u and 8u allowed. L: float scores of exactly representable inputs (the
    // 16-bit products are exact in float), so float32 rounding only (measured 1.3e-7 relative), as the fp32
    // runner.
    return {
        make_check("O", c_.q_dims(), c_.download(b_, o_, c_.q_elems()), ref_.o,
                   tol.value_or(rounding_tolerance(c_.type, 4, 8, ref_.o)), keep_for_viewer(c_.q_elems())),
        make_check("L", c_.row_dims(), b_.download_vector<float>(lse_, c_.rows()), ref_.lse,
                   tol.value_or(Tolerance{1e-5, 1e-4}), keep_for_viewer(c_.rows()))};
  }
  WorkCounts work() const override {
    return {2.0 * (2 * c_.q_elems() + 2 * c_.k_elems()) + 4.0 * c_.rows(), c_.forward_flops()};
  }

 private:
  Backend& b_;
  HalfConfig c_;
  FlashAttn2HalfOp op_;
  HalfInput q_, k_, v_;
  DeviceBuffer o_, lse_;
  AttentionForwardRef ref_;
};

// ---- backward --------------------------------------------------------------------------------------------

// O (rounded to the element type) and L (to float) come from the float64 reference forward on the rounded
// inputs, so the backward is checked on its own.
class HalfBackwardInstance : public Instance {
 public:
  static constexpr const char* kName = "flash_attn2_bwd_half";
  static std::vector<KernelVariant> variants() {
    return {mma_variant(),
            {"mma_fused_dq",
             "mma, with dQ from the dK/dV kernel (dS . K added with float atomics): 5 products per "
             "tile pair instead of 7"}};
  }
  static constexpr const char* kDescription =
      "Flash Attention 2 backward in fp16/bf16 on tensor cores: D = rowsum(dO*O), dQ, dK/dV";

  HalfBackwardInstance(Backend& b, const HalfConfig& c, uint64_t seed)
      : b_(b), c_(c), op_(b, c.type, c.shape.head_dim, c.tiles) {
    const AttentionInputs in = random_attention_inputs(c, seed, true);
    q_ = upload_half(b, in.q, c.type), k_ = upload_half(b, in.k, c.type), v_ = upload_half(b, in.v, c.type);
    d_o_ = upload_half(b, in.d_o, c.type);
    const auto fwd =
        attention_forward_reference(c.values(q_.bits), c.values(k_.bits), c.values(v_.bits), c.shape);
    o_ = upload_half(b, to_float(fwd.o), c.type);
    lse_ = b.upload_vector(to_float(fwd.lse));
    scratch_ = b.alloc_array<float>(op_.backward_scratch_floats(c.problem()));
    dq_ = b.alloc_array<uint16_t>(c.q_elems());
    dk_ = b.alloc_array<uint16_t>(c.k_elems());
    dv_ = b.alloc_array<uint16_t>(c.k_elems());
    poison();
  }
  void poison() override { poison_all(b_, {&scratch_, &dq_, &dk_, &dv_}); }
  void launch() override {
    op_.backward(q_.ptr(), k_.ptr(), v_.ptr(), o_.ptr(), d_o_.ptr(), lse_.as<const float>(),
                 scratch_.as<float>(), dq_.as<uint16_t>(), dk_.as<uint16_t>(), dv_.as<uint16_t>(),
                 c_.problem());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    b_.synchronize();
    if (ref_.dq.empty())
      ref_ = attention_backward_reference(c_.values(q_.bits), c_.values(k_.bits), c_.values(v_.bits),
                                          c_.values(d_o_.bits), c_.shape);
    // P and dS are rounded to the element type before the dV, dK and dQ products, O (through D) is an
    // input rounded to it, and each gradient is rounded once more at the end: measured rel_l2 0.53u-0.68u
    // and max_abs under 1.4u of the largest gradient element (they grow with N); 4u and 8u allowed.
    const bool keep = keep_for_viewer(c_.q_elems() + c_.k_elems());
    auto grad_check = [&](const char* name, std::vector<size_t> dims, const DeviceBuffer& buf, size_t count,
                          const std::vector<double>& ref) {
      return make_check(name, std::move(dims), c_.download(b_, buf, count), ref,
                        tol.value_or(rounding_tolerance(c_.type, 4, 8, ref)), keep);
    };
    return {grad_check("dQ", c_.q_dims(), dq_, c_.q_elems(), ref_.dq),
            grad_check("dK", c_.k_dims(), dk_, c_.k_elems(), ref_.dk),
            grad_check("dV", c_.k_dims(), dv_, c_.k_elems(), ref_.dv)};
  }
  WorkCounts work() const override {
    // 16-bit Q, K, V, O, dO read by the preprocess and the dK/dV kernel (and again by the dQ kernel of mma),
    // dQ, dK, dV written; float L and D (D written once, read by each kernel); mma_fused_dq writes its float
    // dQ accumulator once (zeroing) and reads it once (conversion).
    const double q = double(c_.q_elems()), k = double(c_.k_elems()), rows = double(c_.rows());
    const double passes = c_.tiles.fused_dq ? 1 : 2;
    const double acc = c_.tiles.fused_dq ? 8.0 * q : 0.0;
    return {2.0 * (passes * (3 * q + 2 * k) + q + 2 * k) + 4.0 * (1 + passes) * rows + acc,
            2.5 * c_.forward_flops()};
  }

 private:
  Backend& b_;
  HalfConfig c_;
  FlashAttn2HalfOp op_;
  HalfInput q_, k_, v_, d_o_, o_;
  DeviceBuffer lse_, scratch_, dq_, dk_, dv_;
  AttentionGradsRef ref_;
};

// The runner of an instance class, which names it.
template <class I>
class HalfRunner : public Runner {
 public:
  std::string name() const override { return I::kName; }
  std::string family() const override { return "attention"; }
  std::string description() const override { return I::kDescription; }
  std::string source_path() const override { return kFlashAttn2MmaSource; }
  std::vector<KernelVariant> variants() const override { return I::variants(); }
  std::vector<ParamSpec> params() const override { return half_param_specs(); }
  CompileRequest compile_request(const std::string& variant, const Params& p) const override {
    return fa2_half_compile_request(parse_half_type(param_str(p, "DTYPE")), int(param_int(p, "HEAD_DIM")),
                                    tile_config(variant, p));
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<I>(b, HalfConfig(variant, p), seed);
  }
};

RunnerRegistration<HalfRunner<HalfForwardInstance>> forward_registration;
RunnerRegistration<HalfRunner<HalfBackwardInstance>> backward_registration;

}  // namespace
}  // namespace lab
