// wgmma_gemm's spec and runner: seeded A and B rounded to fp16 or bf16, C = A * B on the warpgroup tensor
// cores of wgmma_gemm.cu, checked against a float64 matmul of the rounded inputs. One variant per operand
// form (ss, rs), B layout (k: K-major, mn: MN-major) and swizzle mode (none, sw32, sw64, sw128).
#include <cmath>

#include "kernels/common/half_type.hpp"
#include "kernels/common/lab_swizzle.cuh"
#include "kernels/compiled_kernel.hpp"
#include "kernels/gemm/wgmma_gemm_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

// One variant's instance of the kernel template: operand form, B layout, swizzle mode.
struct WgmmaGemmVariant {
  std::string name;
  bool rs, b_mn_major;
  int swizzle;  // LAB_SWIZZLE_*
};

std::vector<WgmmaGemmVariant> wgmma_gemm_variants() {
  const std::pair<const char*, int> swizzles[] = {{"sw128", LAB_SWIZZLE_128B},
                                                  {"sw64", LAB_SWIZZLE_64B},
                                                  {"sw32", LAB_SWIZZLE_32B},
                                                  {"none", LAB_SWIZZLE_NONE}};
  std::vector<WgmmaGemmVariant> variants;
  for (const bool rs : {false, true})
    for (const bool mn : {false, true})
      for (const auto& [swizzle_name, swizzle] : swizzles)
        variants.push_back(
            {std::string(rs ? "rs" : "ss") + (mn ? "_mn_" : "_k_") + swizzle_name, rs, mn, swizzle});
  return variants;
}

const WgmmaGemmVariant& variant_of(const std::string& name) {
  static const std::vector<WgmmaGemmVariant> variants = wgmma_gemm_variants();
  for (const WgmmaGemmVariant& v : variants)
    if (v.name == name) return v;
  throw UsageError("wgmma_gemm has no variant " + name);
}

std::string entry_of(const WgmmaGemmVariant& v, const Params& p) {
  return "wgmma_gemm<" + std::to_string(int(parse_half_type(param_str(p, "DTYPE")))) + ", " + p.at("BN") +
         ", " + (v.rs ? "1" : "0") + ", " + (v.b_mn_major ? "1" : "0") + ", " + std::to_string(v.swizzle) +
         ">";
}

std::vector<KernelVariant> kernel_variants() {
  std::vector<KernelVariant> out;
  for (const WgmmaGemmVariant& v : wgmma_gemm_variants()) {
    const char* swizzle = v.swizzle == LAB_SWIZZLE_NONE  ? "no swizzle (8x16-byte core matrices)"
                          : v.swizzle == LAB_SWIZZLE_32B ? "32-byte swizzle"
                          : v.swizzle == LAB_SWIZZLE_64B ? "64-byte swizzle"
                                                         : "128-byte swizzle";
    out.push_back({v.name, std::string(v.rs ? "A from registers" : "A from shared memory") + ", B " +
                               (v.b_mn_major ? "MN-major" : "K-major") + " in shared memory, " + swizzle});
  }
  return out;
}

const KernelSpec& wgmma_gemm_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "wgmma_gemm",
      .family = "gemm",
      .description =
          "C = A * B in fp16/bf16 with float accumulation on Hopper's wgmma (sm_90a): the wgmma probe",
      .source = "gemm/wgmma_gemm.cu",
      .variants = kernel_variants(),
      .params = {{"M", K::Int, "128", "rows of A and C", 64, 16384, false, {}, 64},
                 {"N", K::Int, "256", "columns of B and C (a multiple of BN)", 8, 16384, false, {}, 8},
                 {"K", K::Int, "128", "the reduction length", 64, 16384, false, {}, 64},
                 {"BN",
                  K::Int,
                  "128",
                  "tile width: the N of wgmma m64nNk16",
                  8,
                  256,
                  false,
                  {"8", "16", "32", "64", "128", "256"}},
                 {"DTYPE", K::Choice, "f16", "16-bit element type of A and B", 0, 0, false, {"f16", "bf16"}}},
      .validate =
          [](const Params& p) {
            if (param_int(p, "N") % param_int(p, "BN") != 0)
              throw UsageError("parameter N=" + p.at("N") +
                               " of wgmma_gemm is invalid: must be a multiple of BN=" + p.at("BN") +
                               " (one tile of 64 x BN per block)");
          },
      .compile =
          [](const std::string& variant, const Params& p) {
            return CompileRequest{"gemm/wgmma_gemm.cu", {}, {entry_of(variant_of(variant), p)}};
          },
      .arch_specific = true};
  return spec;
}

// Seeded values in [-1, 1] rounded to the element type.
std::vector<uint16_t> random_half(size_t count, HalfType type, uint64_t seed) {
  return to_half_bits(random_uniform(count, -1.0f, 1.0f, seed), type);
}

// Float64 reference: c[i][j] = sum_k a[i][k] * b[k][j] over the rounded values, and the largest
// sum_k |a[i][k] * b[k][j]| (the scale of the float accumulation's rounding).
struct GemmReference {
  std::vector<double> c;
  double largest_abs_sum = 0;
};
GemmReference gemm_reference(const std::vector<float>& a, const std::vector<float>& b_kn, int m, int n,
                             int k) {
  GemmReference r;
  r.c.assign(size_t(m) * size_t(n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int x = 0; x < k; ++x) {
        const double product = double(a[size_t(i) * k + x]) * double(b_kn[size_t(x) * n + j]);
        sum += product;
        abs_sum += std::abs(product);
      }
      r.c[size_t(i) * n + j] = sum;
      r.largest_abs_sum = std::max(r.largest_abs_sum, abs_sum);
    }
  return r;
}

// B's [k][n] patterns in the variant's global layout: [n][k] for K-major, as they are for MN-major.
std::vector<uint16_t> b_layout(const std::vector<uint16_t>& b_kn, int n, int k, bool mn_major) {
  if (mn_major) return b_kn;
  std::vector<uint16_t> b_nk(b_kn.size());
  for (int x = 0; x < k; ++x)
    for (int j = 0; j < n; ++j) b_nk[size_t(j) * k + x] = b_kn[size_t(x) * n + j];
  return b_nk;
}

class WgmmaGemmInstance : public InstanceBase {
 public:
  WgmmaGemmInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        variant_(variant_of(variant)),
        type_(parse_half_type(param_str(p, "DTYPE"))),
        m_(int(param_int(p, "M"))),
        n_(int(param_int(p, "N"))),
        k_(int(param_int(p, "K"))),
        bn_(int(param_int(p, "BN"))),
        a_bits_(random_half(size_t(m_) * size_t(k_), type_, derive_seed(seed, "a"))),
        b_bits_(random_half(size_t(k_) * size_t(n_), type_, derive_seed(seed, "b"))),
        a_(backend.upload_vector(a_bits_)),
        b_(backend.upload_vector(b_layout(b_bits_, n_, k_, variant_.b_mn_major))),
        c_(output_array<float>(size_t(m_) * size_t(n_))),
        kernel_(backend, wgmma_gemm_spec(), variant, entry_of(variant_, p), p) {}

  void launch() override {
    const WgmmaGemmParams p{
        a_.as<const unsigned short>(), b_.as<const unsigned short>(), c_.as<float>(), m_, n_, k_};
    const size_t shared = 2 * size_t(wgmma_gemm_stage_bytes(!variant_.rs, bn_, variant_.b_mn_major,
                                                            lab_swizzle_row_bytes(variant_.swizzle))) +
                          1024;
    kernel_.launch({{unsigned(n_ / bn_), unsigned(m_ / 64), 1}, {128, 1, 1}, shared}, p);
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const GemmReference ref =
        gemm_reference(half_bits_to_float(a_bits_, type_), half_bits_to_float(b_bits_, type_), m_, n_, k_);
    // Products of 16-bit values are exact in float, so only the float accumulation differs from the float64
    // reference. Any order of K float additions is off by at most K * 2^-24 of the sum of the terms'
    // magnitudes; twice that covers tensor cores that truncate instead of rounding. The typical error is far
    // smaller (rel_l2 ~ 1e-7): 1e-6 on rel_l2. A wrong layout, swizzle or element type is off by O(0.1-1).
    const Tolerance bound{1e-6, 2.0 * k_ * 0x1p-24 * ref.largest_abs_sum};
    return {make_check("c", {size_t(m_), size_t(n_)}, fetch<float>(c_, size_t(m_) * size_t(n_)), ref.c,
                       tol.value_or(bound))};
  }

  WorkCounts work() const override {
    return {2.0 * (double(m_) * k_ + double(k_) * n_) + 4.0 * double(m_) * n_, 2.0 * m_ * double(n_) * k_};
  }

 private:
  const WgmmaGemmVariant& variant_;
  HalfType type_;
  int m_, n_, k_, bn_;
  std::vector<uint16_t> a_bits_, b_bits_;
  DeviceBuffer a_, b_, c_;
  CompiledKernel kernel_;
};

const bool registered = register_runner(wgmma_gemm_spec(), make_instance<WgmmaGemmInstance>());

}  // namespace
}  // namespace lab
