// Runners flash_attn2_fwd_half, flash_attn2_bwd_half, flash_attn2_bwd_dq_half and flash_attn2_bwd_dkdv_half:
// seeded random Q, K, V (and dO) rounded to fp16 or bf16, the tensor-core kernels of flash_attn2_mma.cu
// checked against the float64 reference on the rounded inputs, with tolerances in units of the element type's
// rounding.
#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/attention/attention_runner_support.hpp"
#include "kernels/attention/flash_attn2_half_op.hpp"
#include "kernels/attention/flash_attn_wgmma_bwd_op.hpp"
#include "kernels/attention/flash_attn_wgmma_op.hpp"
#include "kernels/common/half_type.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> half_param_specs() {
  using K = ParamSpec::Kind;
  ParamSpec head_dim{"HEAD_DIM", K::Int, "64", "head dimension: 32, 64, 128 or 256"};
  head_dim.choices = {"32", "64", "128", "256"};
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

// fp16 / bf16 on FlashAttn2HalfOp: elements are 16-bit patterns, the inputs rounded to them.
struct Half16 {
  using Op = FlashAttn2HalfOp;
  using Element = uint16_t;
  HalfType type;
  Fa2MmaConfig tiles;

  Half16(const std::string& variant, const Params& p)
      : type(parse_half_type(param_str(p, "DTYPE"))), tiles(fa2_mma_config(variant, p)) {}
  Op make_op(Backend& b, int head_dim) const { return {b, type, head_dim, tiles}; }
  std::vector<uint16_t> encode(const std::vector<float>& values) const { return to_half_bits(values, type); }
  std::vector<float> decode(const std::vector<uint16_t>& bits) const {
    return half_bits_to_float(bits, type);
  }
  bool fused_dq() const { return tiles.fused_dq; }
  // O: P is rounded to the element type before P.V and O once more at the end, each a relative rounding of up
  // to u (2^-11 fp16, 2^-8 bf16); the final one dominates (P's errors average out over Nk terms): measured
  // rel_l2 0.49u-0.57u and max_abs under 0.9u of max |O| (both types, HEAD_DIM 32-128, N up to 4096, emulator
  // and H200). Gradients: P and dS are rounded to the element type before the dV, dK and dQ products, O
  // (through D) is an input rounded to it, and each gradient is rounded once more at the end: measured rel_l2
  // 0.53u-0.68u and max_abs under 1.4u of the largest gradient element (they grow with N). Both: 4u and 8u
  // allowed on rel_l2 and on max_abs of the largest reference magnitude, plus 1e-5 for the float32 rounding
  // of the O(1) intermediates (scores, dP - D): all the error there is where an output is zero (a single key
  // makes dQ and dK vanish; the kernels leave ~2e-7 there).
  Tolerance tolerance(const Tolerance&, const std::vector<double>& ref) const {
    double largest = 0;
    for (double r : ref) largest = std::max(largest, std::abs(r));
    return {4 * unit_roundoff(type), 8 * unit_roundoff(type) * largest + 1e-5};
  }
};

// The Hopper forward in one of its schedules (flash_attn_wgmma.cu, flash_attn_wgmma_pipelined.cu): the same
// elements, rounding and tolerances as Half16, another op.
// WGMMA_TILE picks its keys per tile and ring depth.
template <WgmmaSchedule SCHEDULE>
struct HalfWgmma : Half16 {
  using Op = FlashAttnWgmmaOp;
  WgmmaTiles tiles;
  int exp2_fma;
  bool persistent;
  HalfWgmma(const std::string& variant, const Params& p)
      : Half16(variant, p),
        tiles(parse_wgmma_tiles(param_str(p, "WGMMA_TILE"))),
        exp2_fma(int(param_int(p, "EXP2_FMA"))),
        persistent(param_bool(p, "PERSISTENT")) {}
  Op make_op(Backend& b, int head_dim) const {
    return {b, type, head_dim, SCHEDULE, tiles, exp2_fma, persistent};
  }
};

// The Hopper backward (flash_attn_wgmma_bwd.cu): the same elements and tolerances as Half16, another op, dQ
// always through the float accumulator. Its vector reductions add the float32 partial dQ of the Nk / 128 CTAs
// in an order that varies from run to run on the GPU: a difference at float32's rounding (~1e-7 relative),
// far under the element type's u that the tolerances count, as for mma_fused_dq's atomics.
struct HalfWgmmaBackward : Half16 {
  using Op = FlashAttnWgmmaBackwardOp;
  using Half16::Half16;
  Op make_op(Backend& b, int head_dim) const { return {b, type, head_dim}; }
  bool fused_dq() const { return true; }
};

// A Hopper forward's rules: HEAD_DIM, then the WGMMA_TILE tiles in shared memory.
std::string wgmma_forward_problem(const Params& p, WgmmaSchedule schedule) {
  const int head_dim = int(param_int(p, "HEAD_DIM"));
  if (std::string problem = fa_wgmma_head_dim_problem(head_dim); !problem.empty()) return problem;
  if (std::string problem = fa_wgmma_exp2_fma_problem(int(param_int(p, "EXP2_FMA")));
      !problem.empty())
    return problem;
  return fa_wgmma_tiles_problem(head_dim, parse_wgmma_tiles(param_str(p, "WGMMA_TILE")), schedule);
}
// The Hopper forward's kernel for the parameters.
CompileRequest wgmma_forward_request(HalfType type, int head_dim, const Params& p, WgmmaSchedule schedule) {
  return fa_wgmma_compile_request(type, head_dim, schedule, parse_wgmma_tiles(param_str(p, "WGMMA_TILE")),
                                  int(param_int(p, "EXP2_FMA")));
}

const KernelVariant kWgmma{"wgmma",
                           "Hopper (sm_90a): TMA loads on an mbarrier ring, a producer warpgroup and two "
                           "wgmma consumer warpgroups (HEAD_DIM 64, 128 or 256)",
                           [](const Params& p) { return wgmma_forward_problem(p, WgmmaSchedule::serial); }};
const KernelVariant kWgmmaPipelined{
    "wgmma_pipelined",
    "wgmma, each consumer warpgroup running the softmax of key tile j while P V of tile j - 1 is on the "
    "tensor cores (HEAD_DIM 64, 128 or 256)",
    [](const Params& p) { return wgmma_forward_problem(p, WgmmaSchedule::pipelined); }};
const KernelVariant kWgmmaBackward{
    "wgmma",
    "Hopper (sm_90a): a CTA per 128 keys, dK and dV in registers over the query tiles, Q and dO by TMA on an "
    "mbarrier ring, two wgmma consumer warpgroups, dQ by float vector reductions (HEAD_DIM 64 or 128)",
    [](const Params& p) { return fa_wgmma_bwd_head_dim_problem(int(param_int(p, "HEAD_DIM"))); }};

// The kernel a Hopper variant compiles, by element type, HEAD_DIM and the parameters.
struct WgmmaRequest {
  std::string variant;
  std::function<CompileRequest(HalfType, int, const Params&)> request;
};

// A runner of flash_attn2_mma.cu: every kernel of the element type, HEAD_DIM and tile shapes; the Hopper
// variants compile their `wgmma` request instead.
KernelSpec half_spec(const char* name, const char* description, std::vector<KernelVariant> variants,
                     std::vector<WgmmaRequest> wgmma) {
  return {.name = name,
          .family = "attention",
          .description = description,
          .source = kFlashAttn2MmaSource,
          .variants = std::move(variants),
          .params = half_param_specs(),
          .compile = [wgmma](const std::string& variant, const Params& p) {
            const HalfType type = parse_half_type(param_str(p, "DTYPE"));
            const int head_dim = int(param_int(p, "HEAD_DIM"));
            for (const WgmmaRequest& w : wgmma)
              if (variant == w.variant) return w.request(type, head_dim, p);
            return fa2_half_compile_request(type, head_dim, fa2_mma_config(variant, p));
          }};
}

// The instance for a variant: INSTANCE<Half16> for the mma.sync variants, INSTANCE<WGMMA> for `wgmma`.
template <template <class> class INSTANCE, class WGMMA>
std::unique_ptr<Instance> make_by_variant(Backend& b, const std::string& variant, const Params& p,
                                          uint64_t seed) {
  if (variant == kWgmma.name) return make_instance<INSTANCE<WGMMA>>()(b, variant, p, seed);
  return make_instance<INSTANCE<Half16>>()(b, variant, p, seed);
}
// The forward's instance: make_by_variant, and `wgmma_pipelined` on the pipelined schedule.
std::unique_ptr<Instance> make_forward(Backend& b, const std::string& variant, const Params& p,
                                       uint64_t seed) {
  if (variant == kWgmmaPipelined.name)
    return make_instance<AttentionForwardInstance<HalfWgmma<WgmmaSchedule::pipelined>>>()(b, variant, p,
                                                                                          seed);
  return make_by_variant<AttentionForwardInstance, HalfWgmma<WgmmaSchedule::serial>>(b, variant, p, seed);
}
template <class P>
using DkdvInstance = AttentionGradientKernelInstance<P, GradientKernel::dkdv>;

const KernelVariant kMma{"mma", "mma.sync m16n8k16 tensor cores, float accumulation, cp.async staging"};
// The forward runner: half_spec with the Hopper variants' WGMMA_TILE.
KernelSpec forward_half_spec() {
  KernelSpec spec = half_spec(
      "flash_attn2_fwd_half", "Flash Attention 2 forward in fp16/bf16 on tensor cores",
      {kMma, kWgmma, kWgmmaPipelined},
      {{kWgmma.name, [](HalfType t, int d,
                        const Params& p) { return wgmma_forward_request(t, d, p, WgmmaSchedule::serial); }},
       {kWgmmaPipelined.name, [](HalfType t, int d, const Params& p) {
          return wgmma_forward_request(t, d, p, WgmmaSchedule::pipelined);
        }}});
  ParamSpec tile{"WGMMA_TILE", ParamSpec::Kind::Choice, "auto",
                 "wgmma variants: keys per tile x K/V stages; auto: by HEAD_DIM 64 / 128 / 256 (wgmma 256x3, 128x2, 64x2; "
                 "wgmma_pipelined 128x3, 128x2, 64x2)"};
  tile.choices = {"auto",  "64x2",  "64x3",  "64x4",  "128x2", "128x3", "128x4",
                  "176x2", "176x3", "192x2", "192x3", "256x2", "256x3"};
  spec.params.push_back(tile);
  spec.params.push_back(exp2_fma_param("wgmma variants"));
  spec.params.push_back({"PERSISTENT", ParamSpec::Kind::Bool, "true",
                         "wgmma_pipelined: one CTA an SM walking the query blocks (true) or one CTA a block (wgmma: always "
                         "one a block)"});
  return spec;
}
const KernelSpec forward_spec = forward_half_spec();

// A backward runner: half_spec with OL.
KernelSpec half_backward_spec(const char* name, const char* description,
                              std::vector<KernelVariant> variants) {
  KernelSpec spec = half_spec(
      name, description, std::move(variants),
      {{kWgmma.name, [](HalfType t, int d, const Params&) { return fa_wgmma_bwd_compile_request(t, d); }}});
  spec.params.push_back(forward_outputs_param());
  return spec;
}

const KernelSpec backward_spec = half_backward_spec(
    "flash_attn2_bwd_half",
    "Flash Attention 2 backward in fp16/bf16 on tensor cores: D = rowsum(dO*O), dQ, dK/dV",
    {kMma,
     {"mma_fused_dq",
      "mma, with dQ from the dK/dV kernel (dS . K added with float atomics): 5 products per tile pair "
      "instead of 7"},
     kWgmmaBackward});
const KernelSpec dq_spec = half_backward_spec(
    "flash_attn2_bwd_dq_half",
    "Flash Attention 2 backward in fp16/bf16, the dQ kernel alone (forward and D = rowsum(dO*O) in set-up)",
    {kMma});
const KernelSpec dkdv_spec = half_backward_spec("flash_attn2_bwd_dkdv_half",
                                                "Flash Attention 2 backward in fp16/bf16, the dK/dV kernel "
                                                "alone (forward and D = rowsum(dO*O) in set-up)",
                                                {kMma, kWgmmaBackward});

const bool registered =
    register_runner(forward_spec, make_forward) &&
    register_runner(backward_spec, make_by_variant<AttentionBackwardInstance, HalfWgmmaBackward>) &&
    register_runner(dq_spec, make_instance<AttentionGradientKernelInstance<Half16, GradientKernel::dq>>()) &&
    register_runner(dkdv_spec, make_by_variant<DkdvInstance, HalfWgmmaBackward>);

}  // namespace
}  // namespace lab
