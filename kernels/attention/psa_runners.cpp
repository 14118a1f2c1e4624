// The PSA kernel specs and their runners: psa_pack_qkv, psa_extract_v, psa_merge_attn (pure rearrangements,
// exact), psa_attention / psa_attention_bwd (the composed PsaOp, checked against the Ultralytics formula
// in float64), psa_attention_half (PsaHalfOp: fp16 / bf16 qkv, NCHW or NHWC views, the same formula on the
// rounded inputs) and psa_attention_tf32_nhwc (PsaTf32NhwcOp: float NHWC views, 3xTF32).
// All seven share the parameters; the composed two compile what PsaOp compiles.
#include <algorithm>
#include <cmath>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/psa_half_op.hpp"
#include "kernels/attention/psa_op.hpp"
#include "kernels/attention/psa_reference.hpp"
#include "kernels/attention/psa_tf32_nhwc_op.hpp"
#include "kernels/nn/nhwc_runner_support.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// The shape of the parameters, its scale rounded to float as the kernels receive it.
PsaShape psa_shape(const Params& p) {
  PsaShape s{int(param_int(p, "B")), int(param_int(p, "NUM_HEADS")), int(param_int(p, "KEY_DIM"))};
  s.height = int(param_int(p, "H")), s.width = int(param_int(p, "W")), s.scale = param_float(p, "SCALE");
  s.scale = double(float(s.softmax_scale()));
  return s;
}

PsaDims psa_dims(const PsaShape& s) {
  return {s.batch, s.num_heads, s.key_dim, s.n(), float(s.scale)};
}

std::vector<size_t> nchw(const PsaShape& s, int channels) {
  return {size_t(s.batch), size_t(channels), size_t(s.height), size_t(s.width)};
}

// A rearrangement is exact: any difference at all is a bug.
constexpr Tolerance kExact{0.0, 0.0};

KernelSpec psa_spec(const char* name, const char* description, std::vector<KernelVariant> variants) {
  using K = ParamSpec::Kind;
  return {.name = name,
          .family = "attention",
          .description = description,
          .source = kPsaSource,
          .variants = std::move(variants),
          .params = {{"B", K::Int, "1", "batch size", 1, 1024},
                     {"NUM_HEADS", K::Int, "2", "attention heads", 1, 64},
                     {"KEY_DIM", K::Int, "32",
                      "key dim (= HEAD_DIM of each FA2 pass): a power of two in [16, 128]", 16, 128, true},
                     {"H", K::Int, "20", "feature map height", 1, 1024},
                     {"W", K::Int, "20", "feature map width", 1, 1024},
                     {"SCALE", K::Float, "0", "softmax scale; 0 means KEY_DIM ** -0.5", 0, 1e6}}};
}

// A psa.cu rearrangement kernel, exported under its runner's name.
KernelSpec rearrangement_spec(const char* name, const char* description) {
  KernelSpec spec =
      psa_spec(name, description, {{"v1", "32x33 shared tile transpose (extract-V: a channel gather)"}});
  spec.entries = {name};
  return spec;
}

// The rule of the one-launch forwards: KEY_DIM 16 or 32.
std::string fused_problem(const Params& p) {
  return psa_fused_problem(int(param_int(p, "KEY_DIM")));
}

// The rule of the 16-bit composed variants: flash_attn2_mma.cu's head widths.
std::string half_problem(const Params& p) {
  return psa_half_problem(int(param_int(p, "KEY_DIM")));
}

// The composed attention, forward or backward; the instance's PsaOp also compiles psa.cu.
KernelSpec attention_spec(const char* name, const char* description) {
  KernelSpec spec =
      psa_spec(name, description,
               {{"tiled", "pack -> 2x FA2 (tiled) -> merge, + extract-V"},
                {"row_per_cta", "pack -> 2x FA2 (row_per_cta) -> merge, + extract-V"},
                {"mma_fp16",
                 "pack (Q, K, V rounded to fp16) -> 2x FA2 on fp16 tensor cores (mma.sync, float "
                 "accumulation) -> merge, + extract-V; float in and out: the fp16 training pass's attention",
                 half_problem},
                {"mma_bf16", "mma_fp16 in bf16: the bf16 training pass's attention", half_problem},
                {"fused",
                 "one launch: 8 query rows per CTA, the keys split over its 8 warps, both value "
                 "halves on shared scores (KEY_DIM 16, 32); the backward on tiled FA2",
                 fused_problem},
                {"fused_tc",
                 "one launch on tensor cores (3xTF32 mma.sync m16n8k8): 16 query rows per CTA, the keys "
                 "split over its 8 warps (KEY_DIM 16, 32); the backward on tiled FA2",
                 fused_problem},
                {"fused_tc_w16",
                 "fused_tc with the keys split over 16 warps (one 8-key tile per step), the warps merged by "
                 "half-warp shuffles after one barrier (KEY_DIM 16, 32); the backward on tiled FA2",
                 fused_problem}});
  spec.compile = [](const std::string& variant, const Params& p) {
    return psa_attention_compile_request(variant, psa_dims(psa_shape(p)));
  };
  return spec;
}

enum class Rearrangement { Pack, ExtractV, Merge };

// One rearrangement: random input(s), one output compared with its reference exactly.
template <Rearrangement R>
class RearrangeInstance : public InstanceBase {
  static constexpr bool kMerge = R == Rearrangement::Merge;

 public:
  RearrangeInstance(Backend& b, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(b),
        s_(psa_shape(p)),
        op_(b, "tiled", psa_dims(s_)),
        in_a_(random_uniform(kMerge ? s_.head_elems() : s_.qkv_elems(), -1.f, 1.f,
                             derive_seed(seed, kMerge ? "o_lo" : "qkv"))),
        in_b_(kMerge ? random_uniform(s_.head_elems(), -1.f, 1.f, derive_seed(seed, "o_hi"))
                     : std::vector<float>()),
        buf_a_(b.upload_vector(in_a_)),
        buf_b_(kMerge ? b.upload_vector(in_b_) : DeviceBuffer()),
        out_(output_array<float>(out_count())) {}
  void launch() override {
    const float* a = buf_a_.as<const float>();
    if constexpr (R == Rearrangement::Pack) op_.pack_qkv(a, out_.as<float>());
    if constexpr (R == Rearrangement::ExtractV) op_.extract_v(a, out_.as<float>());
    if constexpr (kMerge) op_.merge_attn(a, buf_b_.as<const float>(), out_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<float> out = fetch<float>(out_, out_count());
    const std::vector<double> a = to_double(in_a_);
    if constexpr (R == Rearrangement::Pack)
      return {make_check("packed", {4, size_t(s_.batch_heads()), size_t(s_.n()), size_t(s_.key_dim)}, out,
                         psa_pack_reference(a, s_), tol.value_or(kExact))};
    if constexpr (R == Rearrangement::ExtractV)
      return {make_check("v", nchw(s_, s_.out_channels()), out, psa_extract_v_reference(a, s_),
                         tol.value_or(kExact))};
    return {make_check("merged", nchw(s_, s_.out_channels()), out,
                       psa_merge_reference(a, to_double(in_b_), s_), tol.value_or(kExact))};
  }
  WorkCounts work() const override { return {4.0 * 2.0 * out_count(), 0.0}; }

 private:
  size_t out_count() const { return R == Rearrangement::Pack ? s_.qkv_elems() : s_.out_elems(); }
  PsaShape s_;
  PsaOp op_;
  std::vector<float> in_a_, in_b_;
  DeviceBuffer buf_a_, buf_b_, out_;
};

// What the forward and backward instances share: the shape, the op of the variant, its workspace, seeded qkv.
class PsaAttentionInstance : public InstanceBase {
 protected:
  PsaAttentionInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b),
        s_(psa_shape(p)),
        half_(psa_half_type(variant)),
        op_(b, variant, psa_dims(s_)),
        ws_(op_.workspace()),
        qkv_(rounded_to(random_uniform(s_.qkv_elems(), -2.f, 2.f, derive_seed(seed, "qkv")),
                        ActivationType::tf32)),
        qkv_buf_(b.upload_vector(qkv_)) {}
  // Replaces workspace buffers by outputs of the same size: poisoned, so a launch must write them.
  void replace_by_outputs(std::initializer_list<DeviceBuffer*> buffers) {
    for (DeviceBuffer* buf : buffers) *buf = output(buf->bytes());
  }
  // A 16-bit variant's tolerance for an output whose reference is `ref`: RELATIVE u on rel_l2 and MAX_ABS u
  // of the largest |ref| (u = 2^-11 fp16, 2^-8 bf16), plus 1e-5 where an output is near zero. The passes
  // round as flash_attn2_fwd_half / _bwd_half do (4u and 8u there), and the pack rounds Q, K, V besides: the
  // seeded qkv (tf32-rounded, |q| < 2) is exact in fp16 and not in bf16. Measured on the emulator at B 2, 20
  // x 20: x 0.53u fp16 and 0.97u bf16, d_qkv 0.16u and 0.26u (rel_l2); max_abs under 0.5u of the largest.
  Tolerance half_tolerance(double relative, double max_abs, const std::vector<double>& ref) const {
    double largest = 0;
    for (double r : ref) largest = std::max(largest, std::abs(r));
    const double u = unit_roundoff(*half_);
    return {relative * u, max_abs * u * largest + 1e-5};
  }
  // Bytes of an element of the Flash Attention side (packed, O, dO, the passes' gradients).
  double element_bytes() const { return half_ ? 2.0 : 4.0; }
  PsaShape s_;
  std::optional<HalfType> half_;  // the 16-bit variants' element type
  PsaOp op_;
  PsaWorkspace ws_;
  std::vector<float> qkv_;
  DeviceBuffer qkv_buf_;
};

class PsaForwardInstance : public PsaAttentionInstance {
 public:
  PsaForwardInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : PsaAttentionInstance(b, variant, p, seed),
        x_(output_array<float>(s_.out_elems())),
        v_(output_array<float>(s_.out_elems())) {
    replace_by_outputs({&ws_.lse});
  }
  void launch() override { op_.forward(qkv_buf_.as<const float>(), x_.as<float>(), v_.as<float>(), ws_); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    if (ref_.x.empty()) ref_ = psa_attention_reference(to_double(qkv_), s_);
    const Tolerance t = tol.value_or(half_ ? half_tolerance(4, 8, ref_.x) : Tolerance{1e-5, 1e-4});
    const Tolerance l = tol.value_or(half_ ? half_tolerance(4, 8, ref_.lse) : Tolerance{1e-5, 1e-4});
    const size_t rows = size_t(s_.batch_heads()) * s_.n();
    return {make_check("x", nchw(s_, s_.out_channels()), fetch<float>(x_, s_.out_elems()), ref_.x, t),
            make_check("v", nchw(s_, s_.out_channels()), fetch<float>(v_, s_.out_elems()), ref_.v,
                       tol.value_or(kExact)),
            make_check("L", {size_t(s_.batch_heads()), size_t(s_.n())}, fetch<float>(ws_.lse, rows), ref_.lse,
                       l)};
  }
  WorkCounts work() const override {
    const double n = s_.n();
    // Two FA2 passes at HEAD_DIM = KD; bytes: qkv read twice (pack, extract), packed written and read,
    // O_lo/O_hi written and read (in the passes' element), x and v written.
    return {4.0 * (2 * s_.qkv_elems() + 2 * s_.out_elems()) + element_bytes() * (2 * 4 + 4) * s_.head_elems(),
            2 * 4.0 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  DeviceBuffer x_, v_;
  PsaAttentionRef ref_;
};

// The forward runs once at setup; `launch` is the backward: merge backward, 2x FA2 backward, d_qkv assembly.
class PsaBackwardInstance : public PsaAttentionInstance {
 public:
  PsaBackwardInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : PsaAttentionInstance(b, variant, p, seed),
        g_x_(random_uniform(s_.out_elems(), -1.f, 1.f, derive_seed(seed, "g_x"))),
        g_v_(random_uniform(s_.out_elems(), -1.f, 1.f, derive_seed(seed, "g_v"))),
        g_x_buf_(b.upload_vector(g_x_)),
        g_v_buf_(b.upload_vector(g_v_)),
        d_qkv_(output_array<float>(s_.qkv_elems())) {
    DeviceBuffer x = b.alloc_array<float>(s_.out_elems()), v = b.alloc_array<float>(s_.out_elems());
    op_.forward(qkv_buf_.as<const float>(), x.as<float>(), v.as<float>(), ws_);
    b.synchronize();
    replace_by_outputs({&ws_.grads, &ws_.do_lo, &ws_.do_hi, &ws_.delta});
  }
  void launch() override {
    op_.backward(g_x_buf_.as<const float>(), g_v_buf_.as<const float>(), d_qkv_.as<float>(), ws_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    if (ref_.empty())
      ref_ = psa_attention_backward_reference(to_double(qkv_), to_double(g_x_), to_double(g_v_), s_);
    // As flash_attn2_bwd, with dQ and dK summed over two passes.
    return {make_check("d_qkv", nchw(s_, s_.qkv_channels()), fetch<float>(d_qkv_, s_.qkv_elems()), ref_,
                       tol.value_or(half_ ? half_tolerance(4, 8, ref_) : Tolerance{1e-5, 1e-3}))};
  }
  WorkCounts work() const override {
    const double n = s_.n();
    // The NCHW side in float; the passes' tensors (11 a pass, and the six gradients the assembly reads) in
    // their element.
    return {
        4.0 * (3 * s_.out_elems() + 2 * s_.qkv_elems()) + element_bytes() * (2 * 11 + 6) * s_.head_elems(),
        2 * 2.5 * 4.0 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  std::vector<float> g_x_, g_v_;
  DeviceBuffer g_x_buf_, g_v_buf_, d_qkv_;
  std::vector<double> ref_;
};

// check_nhwc_slice of an NHWC runner's x or v: `buf` holds [B * N][out_pitch] elements of `type` (poisoned
// before the launch), the slice [B, H, W, C] at channel `offset`; outputs named `name` and `name`_neighbours.
std::vector<OutputCheck> psa_slice_checks(const std::string& name, const std::vector<unsigned char>& buf,
                                          const PsaShape& s, int out_pitch, int offset, ActivationType type,
                                          const std::vector<double>& ref_nchw, const Tolerance& tol) {
  const int c = s.out_channels();
  std::vector<OutputCheck> checks =
      check_nhwc_slice(buf, {size_t(s.batch), size_t(s.height), size_t(s.width), size_t(c)}, out_pitch,
                       offset, type, nchw_to_pixels(ref_nchw, s.batch, c, s.n()), tol);
  checks[0].output = name;
  checks[1].output = name + "_neighbours";
  return checks;
}

// psa_attention_half: seeded qkv rounded to fp16 / bf16, one PsaHalfOp forward, checked against the float64
// formula on the rounded inputs. LAYOUT nhwc: qkv as an NHWC view of pitch C + 8 whose padding is NaN
// (0xffff: a read of it would spoil the outputs), x and v written into the channel slice [8, 8 + C) of
// poisoned views of pitch C + 16, whose other channels must keep their poison.
class PsaHalfInstance : public InstanceBase {
 public:
  static constexpr int kQkvPad = 8, kOutOffset = 8, kOutPad = 16;

  PsaHalfInstance(Backend& b, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(b),
        s_(psa_shape(p)),
        type_(parse_half_type(param_str(p, "DTYPE"))),
        nhwc_(param_str(p, "LAYOUT") == "nhwc"),
        op_(b, variant, type_, psa_dims(s_)),
        qkv_(to_half_bits(random_uniform(s_.qkv_elems(), -2.f, 2.f, derive_seed(seed, "qkv")), type_)),
        qkv_buf_(nhwc_ ? b.upload_vector(to_nhwc(half_bits_to_float(qkv_, type_), activation_type(type_),
                                                 s_.batch, s_.qkv_channels(), s_.n(), qkv_pitch()))
                       : b.upload_vector(qkv_)),
        x_(output_array<uint16_t>(out_view_elems())),
        v_(output_array<uint16_t>(out_view_elems())),
        lse_(output_array<float>(size_t(s_.batch_heads()) * s_.n())) {}
  void launch() override {
    if (nhwc_)
      op_.forward_nhwc(qkv_buf_.as<const uint16_t>(), qkv_pitch(), x_.as<uint16_t>() + kOutOffset,
                       out_pitch(), v_.as<uint16_t>() + kOutOffset, out_pitch(), lse_.as<float>());
    else
      op_.forward(qkv_buf_.as<const uint16_t>(), x_.as<uint16_t>(), v_.as<uint16_t>(), lse_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    if (ref_.x.empty()) ref_ = psa_attention_reference(to_double(half_bits_to_float(qkv_, type_)), s_);
    // x: P is rounded to the element type before P.V and x once more at the end, each a relative rounding of
    // up to u (2^-11 fp16, 2^-8 bf16), as in flash_attn2_fwd_half (whose measured rel_l2 is 0.5u-0.6u): 4u on
    // rel_l2 and 8u of the largest |x| on max_abs. v is a copy of the rounded input: exact. L: the scores are
    // sums of exact products of 16-bit values in float, so float32's tolerance.
    double largest = 0;
    for (double r : ref_.x) largest = std::max(largest, std::abs(r));
    const double u = unit_roundoff(type_);
    const Tolerance x_tol = tol.value_or(Tolerance{4 * u, 8 * u * largest}), v_tol = tol.value_or(kExact);
    const size_t rows = size_t(s_.batch_heads()) * s_.n();
    OutputCheck lse = make_check("L", {size_t(s_.batch_heads()), size_t(s_.n())}, fetch<float>(lse_, rows),
                                 ref_.lse, tol.value_or(Tolerance{1e-5, 1e-4}));
    if (!nhwc_)
      return {make_check("x", nchw(s_, s_.out_channels()), decode(x_), ref_.x, x_tol),
              make_check("v", nchw(s_, s_.out_channels()), decode(v_), ref_.v, v_tol), lse};
    const ActivationType type = activation_type(type_);
    const size_t bytes = out_view_elems() * sizeof(uint16_t);
    std::vector<OutputCheck> checks = psa_slice_checks("x", fetch<unsigned char>(x_, bytes), s_, out_pitch(),
                                                       kOutOffset, type, ref_.x, x_tol);
    for (OutputCheck& c : psa_slice_checks("v", fetch<unsigned char>(v_, bytes), s_, out_pitch(), kOutOffset,
                                           type, ref_.v, v_tol))
      checks.push_back(std::move(c));
    checks.push_back(std::move(lse));
    return checks;
  }
  WorkCounts work() const override {
    const double n = s_.n();
    // qkv read once, x and v written (2 bytes each), L written; S = Q K^T (KD) and P V (2 KD) per head.
    return {2.0 * (s_.qkv_elems() + 2 * s_.out_elems()) + 4.0 * s_.batch_heads() * n,
            2.0 * 3 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  size_t pixels() const { return size_t(s_.batch) * s_.n(); }
  int qkv_pitch() const { return s_.qkv_channels() + kQkvPad; }
  int out_pitch() const { return s_.out_channels() + kOutPad; }
  size_t out_view_elems() const { return nhwc_ ? pixels() * out_pitch() : s_.out_elems(); }
  std::vector<float> decode(const DeviceBuffer& buf) {
    return half_bits_to_float(fetch<uint16_t>(buf, s_.out_elems()), type_);
  }
  PsaShape s_;
  HalfType type_;
  bool nhwc_;
  PsaHalfOp op_;
  std::vector<uint16_t> qkv_;
  DeviceBuffer qkv_buf_, x_, v_, lse_;
  PsaAttentionRef ref_;
};

// mma_staged's rule: NHWC views, the one-launch forwards' key widths, the head's keys within shared memory.
std::string staged_problem(const Params& p) {
  if (const std::string problem = fused_problem(p); !problem.empty()) return problem;
  if (param_str(p, "LAYOUT") != "nhwc") return "reads NHWC views only (LAYOUT=nhwc)";
  const int64_t n = param_int(p, "H") * param_int(p, "W");
  if (n > kPsaFusedMaxTokens)
    return "stages a head's keys in shared memory: at most " + std::to_string(kPsaFusedMaxTokens) +
           " tokens (got " + std::to_string(n) + ")";
  return "";
}

// The 16-bit forward: the PSA parameters plus the element type and layout; three variants, KEY_DIM 16 or 32.
KernelSpec half_spec() {
  KernelSpec spec =
      psa_spec("psa_attention_half",
               "PSA attention forward on fp16 / bf16 qkv: one launch, mma.sync m16n8k16 with float "
               "accumulation -> x, v (16-bit), L (float)",
               {{"mma",
                 "16 query rows per CTA, the keys split over its 8 warps, both value halves on "
                 "shared scores (KEY_DIM 16, 32)",
                 fused_problem},
                {"mma_w16",
                 "16 query rows per CTA, the keys split over its 16 warps (one or two 16-key tiles each up "
                 "to N 512), the warps merged by half-warp shuffles after one barrier (KEY_DIM 16, 32)",
                 fused_problem},
                {"mma_staged",
                 "mma with the head's K and V rows staged in shared memory by cp.async and read by ldmatrix "
                 "(LAYOUT nhwc, KEY_DIM 16, 32, at most 1024 tokens)",
                 staged_problem}});
  spec.source = kPsaTcSource;
  ParamSpec dtype{"DTYPE", ParamSpec::Kind::Choice, "f16", "16-bit element type of qkv, x and v"};
  dtype.choices = {"f16", "bf16"};
  spec.params.push_back(dtype);
  ParamSpec layout{"LAYOUT", ParamSpec::Kind::Choice, "nchw",
                   "layout of the 16-bit tensors: nchw planes, or nhwc views with pitches wider than the "
                   "channels (x and v written into a channel slice)"};
  layout.choices = {"nchw", "nhwc"};
  spec.params.push_back(layout);
  spec.compile = [](const std::string& variant, const Params& p) {
    return psa_half_compile_request(variant, parse_half_type(param_str(p, "DTYPE")),
                                    int(param_int(p, "KEY_DIM")));
  };
  return spec;
}

// psa_attention_tf32_nhwc: seeded qkv of the element type's values (DTYPE tf32: tf32 values, as that network
// stores them; f32: floats) as an NHWC float view of pitch C + 8 whose padding is NaN (a read of it would
// spoil the outputs), x and v written into the channel slice [8, 8 + C) of poisoned float views of pitch C +
// 16, whose other channels must keep their poison. 3xTF32 products in float32 accuracy: L under float32's
// tolerance (psa_attention's), x too for f32 and for tf32 one unit of its rounding to tf32
// (one_unit_tolerance), v a copy (exact).
class PsaTf32NhwcInstance : public InstanceBase {
 public:
  static constexpr int kQkvPad = 8, kOutOffset = 8, kOutPad = 16;

  PsaTf32NhwcInstance(Backend& b, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(b),
        s_(psa_shape(p)),
        type_(parse_activation_type(param_str(p, "DTYPE"))),
        op_(b, type_, psa_dims(s_)),
        qkv_(rounded_to(random_uniform(s_.qkv_elems(), -2.f, 2.f, derive_seed(seed, "qkv")), type_)),
        qkv_buf_(b.upload_vector(
            to_nhwc(qkv_, type_, s_.batch, s_.qkv_channels(), s_.n(), s_.qkv_channels() + kQkvPad))),
        x_(output_array<float>(out_view_elems())),
        v_(output_array<float>(out_view_elems())),
        lse_(output_array<float>(size_t(s_.batch_heads()) * s_.n())) {}
  void launch() override {
    op_.forward_nhwc(qkv_buf_.as<const float>(), s_.qkv_channels() + kQkvPad, x_.as<float>() + kOutOffset,
                     out_pitch(), v_.as<float>() + kOutOffset, out_pitch(), lse_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    if (ref_.x.empty()) ref_ = psa_attention_reference(to_double(qkv_), s_);
    const Tolerance x_tol =
        type_ == ActivationType::f32 ? Tolerance{1e-5, 1e-4} : one_unit_tolerance(type_, ref_.x);
    const size_t bytes = out_view_elems() * sizeof(float);
    std::vector<OutputCheck> checks = psa_slice_checks("x", fetch<unsigned char>(x_, bytes), s_, out_pitch(),
                                                       kOutOffset, type_, ref_.x, tol.value_or(x_tol));
    for (OutputCheck& c : psa_slice_checks("v", fetch<unsigned char>(v_, bytes), s_, out_pitch(), kOutOffset,
                                           type_, ref_.v, tol.value_or(kExact)))
      checks.push_back(std::move(c));
    const size_t rows = size_t(s_.batch_heads()) * s_.n();
    checks.push_back(make_check("L", {size_t(s_.batch_heads()), size_t(s_.n())}, fetch<float>(lse_, rows),
                                ref_.lse, tol.value_or(Tolerance{1e-5, 1e-4})));
    return checks;
  }
  WorkCounts work() const override {
    const double n = s_.n();
    // qkv read once, x and v written (4 bytes each), L written; three tf32 products for each of S = Q K^T
    // (KD) and P V (2 KD) per head.
    return {4.0 * (s_.qkv_elems() + 2 * s_.out_elems()) + 4.0 * s_.batch_heads() * n,
            2.0 * 3 * s_.batch_heads() * n * n * s_.key_dim};
  }

 private:
  int out_pitch() const { return s_.out_channels() + kOutPad; }
  size_t out_view_elems() const { return size_t(s_.batch) * s_.n() * out_pitch(); }
  PsaShape s_;
  ActivationType type_;
  PsaTf32NhwcOp op_;
  std::vector<float> qkv_;
  DeviceBuffer qkv_buf_, x_, v_, lse_;
  PsaAttentionRef ref_;
};

// The float NHWC networks' forward: the PSA parameters and DTYPE (tf32, f32), one variant, KEY_DIM 16 or 32.
KernelSpec tf32_nhwc_spec() {
  KernelSpec spec =
      psa_spec("psa_attention_tf32_nhwc",
               "PSA attention forward on NHWC float qkv (the tf32 / fp32 NHWC networks'): one launch, "
               "3xTF32 mma.sync m16n8k8 -> x, v (float slices), L",
               {{"mma_3xtf32",
                 "psa_attention fused_tc's work split and 3xTF32 steps on NHWC views with "
                 "pitches (KEY_DIM 16, 32)",
                 fused_problem}});
  spec.source = kPsaTcSource;
  ParamSpec dtype{"DTYPE", ParamSpec::Kind::Choice, "tf32",
                  "float activations: tf32 (tf32 values, merged rounded to tf32) or f32 (unrounded)"};
  dtype.choices = {"tf32", "f32"};
  spec.params.push_back(dtype);
  spec.compile = [](const std::string&, const Params& p) {
    return psa_tf32_nhwc_compile_request(parse_activation_type(param_str(p, "DTYPE")),
                                         int(param_int(p, "KEY_DIM")));
  };
  return spec;
}

const KernelSpec pack_spec =
    rearrangement_spec("psa_pack_qkv", "qkv NCHW [B, nh*4*KD, H, W] -> [4, BH, N, KD] (Q, K, V_lo, V_hi)");
const KernelSpec extract_spec = rearrangement_spec(
    "psa_extract_v", "qkv NCHW -> the V channels [B, nh*2*KD, H, W] (input of the pe conv)");
const KernelSpec merge_spec =
    rearrangement_spec("psa_merge_attn", "two FA2 outputs [BH, N, KD] (lo, hi) -> NCHW [B, nh*2*KD, H, W]");
const KernelSpec forward_spec =
    attention_spec("psa_attention",
                   "PSA attention forward: pack -> FA2 on V_lo, V_hi (shared Q, K, L) -> merge, + extract-V");
const KernelSpec backward_spec = attention_spec(
    "psa_attention_bwd",
    "PSA attention backward: merge bwd -> 2x FA2 bwd -> d_qkv (dQ, dK summed; + the extract-V gradient)");
const KernelSpec half_psa_spec = half_spec();
const KernelSpec tf32_nhwc_psa_spec = tf32_nhwc_spec();

const bool registered =
    register_runner(pack_spec, make_instance<RearrangeInstance<Rearrangement::Pack>>()) &&
    register_runner(extract_spec, make_instance<RearrangeInstance<Rearrangement::ExtractV>>()) &&
    register_runner(merge_spec, make_instance<RearrangeInstance<Rearrangement::Merge>>()) &&
    register_runner(forward_spec, make_instance<PsaForwardInstance>()) &&
    register_runner(backward_spec, make_instance<PsaBackwardInstance>()) &&
    register_runner(half_psa_spec, make_instance<PsaHalfInstance>()) &&
    register_runner(tf32_nhwc_psa_spec, make_instance<PsaTf32NhwcInstance>());

}  // namespace
}  // namespace lab
