// The wgmma layer (kernels/common/lab_wgmma.cuh; emulator side nvrtc_runtime/cpu/device/lab_emu_wgmma.hpp):
//  - one product at a time (tests/emulator_kernels/wgmma.cu) on every available backend: the accumulator
//    and A-register layouts, K-major and N-major B, against exact small-integer products composed here from
//    the PTX ISA's canonical layouts;
//  - the emulator's model of asynchrony and its errors (cpu only: on a GPU these are undefined behaviour);
//  - every variant of the wgmma_gemm probe on the cpu backend against a float64 matmul written here, and the
//    runner's own check; the [gpu] twin runs the same variants on cuda and compares the H200's C with the
//    emulator's and the reference; NVRTC's SASS of the probe (no GPU needed) contains HGMMA.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kernels/common/half_type.hpp"
#include "kernels/common/lab_swizzle.cuh"
#include "kernels/gemm/wgmma_gemm_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// ---- one product: operands composed here -----------------------------------------------------------------

// Small integers, exact in fp16 and in every float sum of 16 products.
float a_value(int i, int k) {
  return float((i * 5 + k * 3) % 7 - 3);
}
float b_value(int k, int n) {
  return float((k * 2 + n * 5) % 9 - 4);
}

uint16_t f16_bits(float v) {
  return to_half_bits({v}, HalfType::f16)[0];
}

// The shared image of one m64nNk16 product, without swizzle (PTX ISA canonical layouts, core matrices of 8
// rows x 16 bytes): A at 0, K-major (LBO 1024: the next 8 k; SBO 128: the next 8 rows) or M-major (element
// (i, k) at (i % 8) * 2 + (i / 8) * SBO + (k % 8) * 16 + (k / 8) * LBO, the same LBO and SBO); B after it,
// K-major (LBO N * 16, SBO 128) or N-major (element (n, k) at (n % 8) * 2 + (n / 8) * SBO + (k % 8) * 16 + (k
// / 8) * LBO, SBO 256, LBO 128).
struct ProductImage {
  std::vector<uint16_t> halves;
  unsigned b_offset = 64 * 16 * 2, a_lbo = 1024, a_sbo = 128, b_lbo, b_sbo;
};
ProductImage product_image(int n, bool a_m_major, bool b_n_major) {
  ProductImage image;
  image.halves.assign(size_t(64 + n) * 16, 0);
  auto put = [&](unsigned byte_offset, float v) { image.halves[byte_offset / 2] = f16_bits(v); };
  for (int i = 0; i < 64; ++i)
    for (int k = 0; k < 16; ++k)
      put(a_m_major ? i % 8 * 2 + i / 8 * 128 + k % 8 * 16 + k / 8 * 1024
                    : i % 8 * 16 + i / 8 * 128 + k % 8 * 2 + k / 8 * 1024,
          a_value(i, k));
  image.b_lbo = b_n_major ? 128 : unsigned(n) * 16;
  image.b_sbo = b_n_major ? 256 : 128;
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < 16; ++k)
      put(image.b_offset + (b_n_major ? j % 8 * 2 + j / 8 * image.b_sbo + k % 8 * 16 + k / 8 * image.b_lbo
                                      : j % 8 * 16 + j / 8 * image.b_sbo + k % 8 * 2 + k / 8 * image.b_lbo),
          b_value(k, j));
  return image;
}

// Thread t's A registers (RS form): rows 16 w + g (+ 8), k = 2 q (+ 1) (+ 8), the lower k in the low half.
std::vector<uint32_t> a_fragments() {
  std::vector<uint32_t> regs(128 * 4);
  for (int t = 0; t < 128; ++t) {
    const int row = 16 * (t / 32) + t % 32 / 4, k = 2 * (t % 4);
    auto pair = [&](int r, int c) {
      return uint32_t(f16_bits(a_value(r, c))) | uint32_t(f16_bits(a_value(r, c + 1))) << 16;
    };
    regs[t * 4 + 0] = pair(row, k);
    regs[t * 4 + 1] = pair(row + 8, k);
    regs[t * 4 + 2] = pair(row, k + 8);
    regs[t * 4 + 3] = pair(row + 8, k + 8);
  }
  return regs;
}

// D = A * B in the documented accumulator layout: out[t * N / 2 + i] = D[16 w + g + 8 ((i / 2) % 2)][8 (i /
// 4) + 2 q + i % 2].
std::vector<float> expected_d(int n, float scale) {
  std::vector<float> out(size_t(128) * n / 2);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < n / 2; ++i) {
      const int row = 16 * (t / 32) + t % 32 / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
      double sum = 0;
      for (int k = 0; k < 16; ++k) sum += double(a_value(row, k)) * double(b_value(k, col));
      out[size_t(t) * n / 2 + i] = float(scale * sum);
    }
  return out;
}

struct ProductRun {
  std::vector<float> out;
  std::string error;
};

// Runs wgmma_once<n, rs, m_major, n_major> in `mode` with `threads` threads; `a_offset` moves A's descriptor.
ProductRun run_product(Backend& backend, int n, bool rs, bool n_major, int mode, unsigned threads = 128,
                       unsigned a_offset = 0, unsigned b_offset_extra = 0, bool m_major = false) {
  const ProductImage image = product_image(n, m_major, n_major);
  const std::string kernel = "wgmma_once<" + std::to_string(n) + ", " + (rs ? "1" : "0") + ", " +
                             (m_major ? "1" : "0") + ", " + (n_major ? "1" : "0") + ">";
  CompileRequest request{"wgmma.cu", {}, {kernel}};
  request.arch_specific = true;
  auto module = backend.compile(request);
  DeviceBuffer d_image = backend.upload_vector(image.halves);
  DeviceBuffer d_frag = backend.upload_vector(a_fragments());
  const size_t count = size_t(threads) * n;  // room for both writes of modes 1 and 3
  DeviceBuffer d_out = test::poisoned_floats(backend, count);
  void *image_ptr = d_image.get(), *frag_ptr = d_frag.get(), *out_ptr = d_out.get();
  int chunks = int(image.halves.size() / 8), m = mode;
  unsigned a_off = a_offset, a_lbo = image.a_lbo, a_sbo = image.a_sbo,
           b_off = image.b_offset + b_offset_extra, b_lbo = image.b_lbo, b_sbo = image.b_sbo;
  ProductRun run;
  try {
    backend.launch(
        module->kernel(kernel), {{1, 1, 1}, {threads, 1, 1}, image.halves.size() * 2},
        kernel_args(image_ptr, chunks, frag_ptr, a_off, a_lbo, a_sbo, b_off, b_lbo, b_sbo, out_ptr, m));
    backend.synchronize();
    run.out = backend.download_vector<float>(d_out, count);
  } catch (const RuntimeError& e) {
    run.error = e.what();
  }
  return run;
}

size_t mismatches(const std::vector<float>& got, const std::vector<float>& want, size_t offset = 0) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[offset + i] == want[i]) && wrong++ < 6)
      UNSCOPED_INFO("thread " << i / (want.size() / 128) << " d[" << i % (want.size() / 128) << "]: got "
                              << got[offset + i] << " expected " << want[i]);
  return wrong;
}

// ---- the wgmma_gemm probe
// -----------------------------------------------------------------------------------

const Runner& probe() {
  return Registry::instance().get("wgmma_gemm");
}

// The probe's C for seeded A [m][k] and B [k][n] (16-bit patterns), B passed in the variant's layout.
std::vector<float> probe_c(Backend& backend, const std::string& variant, const Params& params,
                           const std::vector<uint16_t>& a, const std::vector<uint16_t>& b_kn) {
  const int m = int(param_int(params, "M")), n = int(param_int(params, "N")), k = int(param_int(params, "K"));
  const int bn = int(param_int(params, "BN"));
  const bool rs = variant.rfind("rs", 0) == 0, mn = variant.find("_mn_") != std::string::npos;
  const int swizzle = variant.ends_with("sw128")  ? LAB_SWIZZLE_128B
                      : variant.ends_with("sw64") ? LAB_SWIZZLE_64B
                      : variant.ends_with("sw32") ? LAB_SWIZZLE_32B
                                                  : LAB_SWIZZLE_NONE;
  std::vector<uint16_t> b(b_kn.size());
  for (int x = 0; x < k; ++x)
    for (int j = 0; j < n; ++j) (mn ? b[size_t(x) * n + j] : b[size_t(j) * k + x]) = b_kn[size_t(x) * n + j];
  const CompileRequest request = probe().compile_request(variant, params);
  auto module = backend.compile(request);
  DeviceBuffer d_a = backend.upload_vector(a), d_b = backend.upload_vector(b);
  DeviceBuffer d_c = test::poisoned_floats(backend, size_t(m) * n);
  const WgmmaGemmParams p{
      d_a.as<const unsigned short>(), d_b.as<const unsigned short>(), d_c.as<float>(), m, n, k};
  const size_t shared =
      2 * size_t(wgmma_gemm_stage_bytes(!rs, bn, mn, lab_swizzle_row_bytes(swizzle))) + 1024;
  backend.launch(module->kernel(request.name_expressions.at(0)),
                 {{unsigned(n / bn), unsigned(m / 64), 1}, {128, 1, 1}, shared}, kernel_params(p));
  backend.synchronize();
  return backend.download_vector<float>(d_c, size_t(m) * n);
}

struct ProbeCase {
  std::string variant, dtype;
  int bn;
};

// Every variant in fp16 at BN 64; bf16 and the other tile widths on a few of them.
std::vector<ProbeCase> probe_cases() {
  std::vector<ProbeCase> cases;
  for (const KernelVariant& v : probe().variants()) cases.push_back({v.name, "f16", 64});
  for (const char* v : {"ss_k_sw128", "ss_mn_sw64", "rs_k_sw32", "rs_mn_none"})
    cases.push_back({v, "bf16", 64});
  cases.push_back({"ss_k_sw128", "f16", 8});
  cases.push_back({"ss_mn_sw128", "f16", 16});
  cases.push_back({"rs_k_sw64", "bf16", 32});
  cases.push_back({"rs_mn_sw128", "f16", 128});
  cases.push_back({"ss_k_sw32", "f16", 256});
  return cases;
}

struct ProbeReference {
  std::vector<double> c;
  double bound;  // the float accumulation's rounding bound (see the check below)
};

// Float64 C of the rounded inputs and the bound 2 * K * 2^-24 * max sum_k |a b|: any order of K float
// additions of exact products is off by at most K * 2^-24 of the sum of magnitudes, twice that for tensor
// cores that truncate.
ProbeReference probe_reference(const std::vector<float>& a, const std::vector<float>& b, int m, int n,
                               int k) {
  ProbeReference r{std::vector<double>(size_t(m) * n), 0};
  double largest = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, magnitude = 0;
      for (int x = 0; x < k; ++x) {
        s += double(a[size_t(i) * k + x]) * b[size_t(x) * n + j];
        magnitude += std::fabs(double(a[size_t(i) * k + x]) * b[size_t(x) * n + j]);
      }
      r.c[size_t(i) * n + j] = s;
      largest = std::max(largest, magnitude);
    }
  r.bound = 2.0 * k * 0x1p-24 * largest;
  return r;
}

double worst_error(const std::vector<float>& c, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::isfinite(c[i]) ? std::fabs(c[i] - ref[i]) : 1e30);
  return worst;
}

struct ProbeResult {
  std::vector<float> c;
  double bound;
};

// Runs every probe case on `backend`: C within the bound of the reference, the runner's own check passing;
// returns each case's C and bound.
std::vector<ProbeResult> run_probe_cases(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  std::vector<ProbeResult> results;
  const int m = 128, k = 128;
  for (const ProbeCase& c : probe_cases()) {
    const int n = std::max(2 * c.bn, 64);
    const Params params = resolve_params(probe(), {{"M", std::to_string(m)},
                                                   {"N", std::to_string(n)},
                                                   {"K", std::to_string(k)},
                                                   {"BN", std::to_string(c.bn)},
                                                   {"DTYPE", c.dtype}});
    INFO(backend_name << " " << c.variant << " " << c.dtype << " BN " << c.bn);
    const HalfType type = parse_half_type(c.dtype);
    const std::vector<uint16_t> a = to_half_bits(random_uniform(size_t(m) * k, -1.0f, 1.0f, 91), type);
    const std::vector<uint16_t> b = to_half_bits(random_uniform(size_t(k) * n, -1.0f, 1.0f, 92), type);
    const ProbeReference ref =
        probe_reference(half_bits_to_float(a, type), half_bits_to_float(b, type), m, n, k);
    results.push_back({probe_c(*backend, c.variant, params, a, b), ref.bound});
    const double worst = worst_error(results.back().c, ref.c);
    INFO("worst |C - ref| " << worst << ", bound " << ref.bound);
    CHECK(worst <= ref.bound);
    auto instance = probe().instantiate(*backend, c.variant, params, 5);
    instance->launch();
    for (const OutputCheck& check : instance->check(std::nullopt)) {
      INFO("runner check: rel_l2 " << check.metrics.rel_l2 << " max_abs " << check.metrics.max_abs);
      CHECK(check.pass);
    }
  }
  return results;
}

}  // namespace

TEST_CASE(
    "wgmma: one m64nNk16 product gives the documented accumulator layout (SS, RS, K- and MN-major A, B)",
    "[emulator][wgmma]") {
  for (const std::string& name : available_backends()) {
    auto backend = make_backend(name, test::emulator_kernels_context());
    for (const int n : {8, 16, 64})
      for (const int form : {0, 1, 2})  // SS, SS with M-major A, RS
        for (const bool n_major : {false, true}) {
          const bool rs = form == 2, m_major = form == 1;
          INFO("backend " << name << " N " << n
                          << (rs        ? " RS"
                              : m_major ? " SS, M-major A"
                                        : " SS")
                          << (n_major ? " N-major B" : " K-major B"));
          const ProductRun run = run_product(*backend, n, rs, n_major, 0, 128, 0, 0, m_major);
          REQUIRE(run.error.empty());
          CHECK(mismatches(run.out, expected_d(n, 1.0f)) == 0);
        }
  }
}

TEST_CASE("emulator: wgmma accumulators change only at wait_group, operands are read then",
          "[emulator][wgmma]") {
  auto backend = test::emulator_backend();
  const std::vector<float> product = expected_d(16, 1.0f);
  SECTION("read before the wait: the initial NaN; after it: the product") {
    const ProductRun run = run_product(*backend, 16, false, false, 1);
    REQUIRE(run.error.empty());
    size_t not_nan = 0;
    for (size_t i = 0; i < product.size(); ++i) not_nan += !std::isnan(run.out[i]);
    CHECK(not_nan == 0);
    CHECK(mismatches(run.out, product, product.size()) == 0);
  }
  SECTION("operands zeroed after the commit, before the wait: the product of zeros") {
    for (const bool rs : {false, true}) {
      const ProductRun run = run_product(*backend, 16, rs, false, 2);
      REQUIRE(run.error.empty());
      CHECK(mismatches(run.out, std::vector<float>(product.size(), 0.0f)) == 0);
    }
  }
  SECTION("two groups: wait_group<1> completes the first only") {
    const ProductRun run = run_product(*backend, 16, true, true, 3);
    REQUIRE(run.error.empty());
    CHECK(mismatches(run.out, product) == 0);
    CHECK(mismatches(run.out, expected_d(16, 2.0f), product.size()) == 0);
  }
}

TEST_CASE("emulator: setmaxnreg compiles and runs as a no-op", "[emulator][wgmma]") {
  auto backend = test::emulator_backend();
  auto module = backend->compile({"wgmma.cu", {}, {"wgmma_registers"}, true});
  DeviceBuffer out = backend->upload_vector(std::vector<int>(256, -1));
  void* out_ptr = out.get();
  backend->launch(module->kernel("wgmma_registers"), {{1, 1, 1}, {256, 1, 1}}, kernel_args(out_ptr));
  backend->synchronize();
  const std::vector<int> got = backend->download_vector<int>(out, 256);
  for (int t = 0; t < 256; ++t) CHECK(got[t] == t);
}

TEST_CASE("emulator: a misused wgmma fails the launch at its line", "[emulator][wgmma]") {
  auto backend = test::emulator_backend();
  SECTION("a block of 64 threads has no whole warpgroup") {
    const ProductRun run = run_product(*backend, 8, false, false, 0, 64);
    INFO(run.error);
    CHECK_THAT(run.error, Contains("at wgmma.cu:45: wgmma is issued by a warpgroup of 4 whole warps (threads "
                                   "0-127 of the block), but the block has 64 threads"));
  }
  SECTION("the second warpgroup of a 160-thread block is not whole") {
    const ProductRun run = run_product(*backend, 8, true, false, 0, 160);
    INFO(run.error);
    CHECK_THAT(run.error, Contains("at wgmma.cu:43: wgmma is issued by a warpgroup of 4 whole warps (threads "
                                   "128-255 of the block), but the block has 160 threads"));
  }
  SECTION("half the lanes of each warp make the call") {
    const ProductRun run = run_product(*backend, 8, false, false, 4);
    INFO(run.error);
    CHECK_THAT(run.error, Contains("at wgmma.cu:45: lab_wgmma_ss is a warp collective of all 32 lanes, but "
                                   "lanes 0xffff0000 of the warp are not in this call"));
  }
  SECTION("B reaches past the dynamic shared memory") {
    const ProductRun run = run_product(*backend, 8, false, false, 0, 128, 0, 64);
    INFO(run.error);
    CHECK_THAT(run.error,
               Contains("at wgmma.cu:45: wgmma: the B matrix (descriptor start 0x840, leading byte "
                        "offset 128, stride byte offset 128, swizzle none) reads shared address "
                        "0x900, past the block's 2304 bytes of dynamic shared memory"));
  }
  SECTION("a descriptor of a pointer that is not 16-byte aligned") {
    const ProductRun run = run_product(*backend, 8, false, false, 0, 128, 8);
    INFO(run.error);
    CHECK_THAT(run.error,
               Contains("at wgmma.cu:46: lab_wgmma_desc: the matrix start (shared address 0x8) is not "
                        "16-byte aligned"));
  }
  SECTION("a descriptor of a static __shared__ array") {
    auto module = backend->compile({"wgmma.cu", {}, {"wgmma_static_shared"}});
    DeviceBuffer out = test::poisoned_floats(*backend, 128);
    void* out_ptr = out.get();
    std::string error;
    try {
      backend->launch(module->kernel("wgmma_static_shared"), {{1, 1, 1}, {128, 1, 1}}, kernel_args(out_ptr));
    } catch (const RuntimeError& e) {
      error = e.what();
    }
    INFO(error);
    CHECK_THAT(error, Contains("lab_wgmma_desc: the pointer is not in the block's 0 bytes of dynamic shared "
                               "memory (on the emulator the shared window of wgmma operands is "
                               "LAB_DYNAMIC_SHARED)"));
  }
}

TEST_CASE("wgmma_gemm: every variant matches a float64 matmul on the cpu backend", "[emulator][wgmma]") {
  run_probe_cases("cpu");
}

TEST_CASE("wgmma_gemm: the H200 matches the emulator and the float64 matmul in every variant",
          "[wgmma][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const std::vector<ProbeResult> gpu = run_probe_cases("cuda"), emulator = run_probe_cases("cpu");
  const std::vector<ProbeCase> cases = probe_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].variant << " " << cases[i].dtype << " BN " << cases[i].bn);
    // Both are within the accumulation bound of the reference, so within twice it of each other: they
    // differ only in the order of the float additions.
    double largest_difference = 0;
    for (size_t j = 0; j < gpu[i].c.size(); ++j)
      largest_difference = std::max(largest_difference, double(std::fabs(gpu[i].c[j] - emulator[i].c[j])));
    INFO("largest |H200 - emulator| " << largest_difference << ", bound " << gpu[i].bound);
    CHECK(largest_difference <= 2 * gpu[i].bound);
  }
}

TEST_CASE("wgmma_gemm compiles with NVRTC for sm_90a to wgmma, and its SASS has HGMMA (no GPU needed)",
          "[emulator][wgmma]") {
  const RuntimeContext ctx = test::embedded_context();
  const Params params = resolve_params(probe(), {{"BN", "64"}});
  for (const char* variant : {"ss_k_sw128", "rs_mn_sw64"}) {
    INFO(variant);
    const CompileRequest request = probe().compile_request(variant, params);
    CHECK(request.arch_specific);
    CHECK(nvrtc_target(request, "sm_90") == "sm_90a");
    const CompileResult r = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_90");
    CHECK(r.target == "sm_90a");
    CHECK_THAT(r.ptx, Contains(".target sm_90a"));
    CHECK_THAT(r.ptx, Contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"));
    CHECK_THAT(r.ptx, Contains("wgmma.fence.sync.aligned"));
    CHECK_THAT(r.ptx, Contains("wgmma.commit_group.sync.aligned"));
    CHECK_THAT(r.ptx, Contains("wgmma.wait_group.sync.aligned 1"));
    CHECK_THAT(r.ptx, Contains("fence.proxy.async.shared::cta"));
    CHECK_THAT(disassemble_sass(r), Contains("HGMMA.64x64x16.F32"));
  }
  // The one-product test kernels compile for the GPU too (what the layout test runs there).
  CompileRequest once{
      "wgmma.cu", {}, {"wgmma_once<16, 1, 0, 1>", "wgmma_once<64, 0, 1, 0>", "wgmma_registers"}, true};
  const RuntimeContext test_ctx = test::emulator_kernels_context();
  const std::string once_ptx = compile_with_nvrtc(*test_ctx.tree, *test_ctx.cache, once, "sm_90").ptx;
  CHECK_THAT(once_ptx, Contains("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16"));
  CHECK_THAT(once_ptx, Contains("setmaxnreg.dec.sync.aligned.u32 40"));
  CHECK_THAT(once_ptx, Contains("setmaxnreg.inc.sync.aligned.u32 232"));
  // Other requests keep the plain target.
  CHECK(nvrtc_target({"gemm/wgmma_gemm.cu", {}, {}}, "sm_90") == "sm_90");
  CHECK(nvrtc_target({"gemm/wgmma_gemm.cu", {}, {}, true}, "sm_80") == "sm_80");
}
