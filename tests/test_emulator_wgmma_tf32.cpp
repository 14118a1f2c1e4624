// The tf32 side of the wgmma layer (kernels/common/lab_wgmma.cuh, LAB_F32; emulator: lab_emu_wgmma.hpp), on
// tests/emulator_kernels/wgmma_tf32.cu, on every available backend:
//  - four m64nNk8 products (K 32) of float operands whose tf32 parts are small integers and whose 13 low
//    mantissa bits hold seeded noise, no swizzle and 128-byte swizzle, against float64 sums of the integers:
//    the products read only the tf32 bits (the noise is truncated away; rounding would add a tf32 ulp to the
//    operands whose bit 12 is set), and every sum is exact, so the check is equality.
// The [gpu] twin compares the H200 with the emulator: those products value for value (which confirms or
// refutes the emulator's truncation model: the sums are exact under either order of accumulation, so they
// differ only if the operands are read differently), and products of random floats within the accumulation
// bound derived there (rounded operands would land far outside it). NVRTC's PTX and SASS (no GPU needed) hold
// the tf32 wgmma.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/common/lab_swizzle.cuh"
#include "kernels/compare.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"
#include "tests/wgmma_accumulators.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

constexpr int kK = 32;  // the reduction of a test: four k8 products
constexpr int kSteps = kK / 8;

int a_value(int i, int k) {
  return (i * 5 + k * 3) % 7 - 3;
}
int b_value(int k, int n) {
  return (k * 2 + n * 5) % 9 - 4;
}

// The float bits of `value` with the 13 low mantissa bits set to `noise` (zero stays zero).
float with_low_bits(float value, uint32_t noise) {
  if (value == 0.0f) return value;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits & ~0x1fffu) | (noise & 0x1fffu);
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// rows x kK integers value(r, k) (B: value(k, r)), each with seeded noise in its low 13 bits.
std::vector<float> noisy_integer_matrix(int rows, int (*value)(int, int), bool transposed, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> m(size_t(rows) * kK);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < kK; ++k)
      m[size_t(r) * kK + k] = with_low_bits(float(transposed ? value(k, r) : value(r, k)), rng());
  return m;
}

// The shared image of A [64][kK] at 0 and B [N][kK] at b_offset, K-major, 4-byte elements, and the step
// between the k8 products' descriptors. No swizzle: core matrices of 8 rows x 16 bytes (4 floats), (i % 8)
// 16 + (i / 8) SBO + (k % 4) 4 + (k / 4) LBO with SBO 128 and LBO the operand's rows x 16, a step 2 LBO. 128B
// swizzle: rows of 128 bytes (32 floats), (i % 8) 128 + (i / 8) 1024 + 4 k, swizzled on the address, a step
// 32 bytes.
struct ProductImage {
  std::vector<float> floats;
  unsigned a_lbo, a_sbo, a_step, b_offset, b_lbo, b_sbo, b_step;
};

ProductImage product_image(int n, int swizzle, const std::vector<float>& a, const std::vector<float>& b) {
  const bool swizzled = swizzle != LAB_SWIZZLE_NONE;
  ProductImage image{{},
                     swizzled ? 16u : 1024u,
                     swizzled ? 1024u : 128u,
                     swizzled ? 32u : 2048u,
                     8192u,
                     swizzled ? 16u : unsigned(n) * 16,
                     swizzled ? 1024u : 128u,
                     swizzled ? 32u : unsigned(n) * 32};
  image.floats.assign((image.b_offset + size_t(n) * kK * 4) / 4, 0.0f);
  auto put = [&](unsigned start, unsigned lbo, unsigned sbo, int i, int k, float v) {
    const unsigned offset = swizzled ? start + i % 8 * 128 + i / 8 * sbo + k * 4
                                     : start + i % 8 * 16 + i / 8 * sbo + k % 4 * 4 + k / 4 * lbo;
    image.floats[lab_swizzle_address(swizzle, offset) / 4] = v;
  };
  for (int i = 0; i < 64; ++i)
    for (int k = 0; k < kK; ++k) put(0, image.a_lbo, image.a_sbo, i, k, a[size_t(i) * kK + k]);
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < kK; ++k) put(image.b_offset, image.b_lbo, image.b_sbo, j, k, b[size_t(j) * kK + k]);
  return image;
}

std::vector<float> run_product(Backend& backend, int n, int swizzle, const std::vector<float>& a,
                               const std::vector<float>& b) {
  const ProductImage image = product_image(n, swizzle, a, b);
  const std::string kernel = "wgmma_tf32_steps<" + std::to_string(n) + ">";
  auto module = backend.compile({"wgmma_tf32.cu", {}, {kernel}, true});
  DeviceBuffer d_image = backend.upload_vector(image.floats);
  DeviceBuffer d_out = test::poisoned_floats(backend, size_t(64) * n);
  void *image_ptr = d_image.get(), *out_ptr = d_out.get();
  int chunks = int(image.floats.size() / 4), steps = kSteps, sw = swizzle;
  unsigned a_step = image.a_step, a_lbo = image.a_lbo, a_sbo = image.a_sbo, b_offset = image.b_offset,
           b_step = image.b_step, b_lbo = image.b_lbo, b_sbo = image.b_sbo;
  backend.launch(module->kernel(kernel), {{1, 1, 1}, {128, 1, 1}, image.floats.size() * 4 + 1024},
                 kernel_args(image_ptr, chunks, steps, a_step, a_lbo, a_sbo, b_offset, b_step, b_lbo, b_sbo,
                             sw, out_ptr));
  backend.synchronize();
  return backend.download_vector<float>(d_out, size_t(64) * n);
}

std::vector<double> integer_product(int n) {
  return test::in_accumulator_layout(n, [](int i, int j) {
    double sum = 0;
    for (int k = 0; k < kK; ++k) sum += a_value(i, k) * b_value(k, j);
    return sum;
  });
}

}  // namespace

TEST_CASE("wgmma tf32: four m64nNk8 products read only the tf32 bits of float operands (no swizzle, 128B)",
          "[emulator][wgmma][tf32]") {
  const std::vector<float> a = noisy_integer_matrix(64, a_value, false, 11);
  for (const std::string& name : available_backends()) {
    auto backend = make_backend(name, test::emulator_kernels_context());
    for (const int n : {8, 64, 256})
      for (const int swizzle : {LAB_SWIZZLE_NONE, LAB_SWIZZLE_128B}) {
        INFO("backend " << name << " N " << n << " swizzle " << swizzle);
        const std::vector<float> got =
            run_product(*backend, n, swizzle, a, noisy_integer_matrix(n, b_value, true, 12));
        CHECK(test::accumulator_mismatches(got, integer_product(n)) == 0);
      }
  }
}

TEST_CASE("wgmma tf32: the H200's products match the emulator's", "[wgmma][tf32][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto gpu = make_backend("cuda", test::emulator_kernels_context());
  auto cpu = test::emulator_backend();
  SECTION("integer tf32 parts with noise in the 13 low bits, N 256, 128B: the same values (truncation)") {
    const std::vector<float> a = noisy_integer_matrix(64, a_value, false, 21),
                             b = noisy_integer_matrix(256, b_value, true, 22);
    const std::vector<float> g = run_product(*gpu, 256, LAB_SWIZZLE_128B, a, b),
                             c = run_product(*cpu, 256, LAB_SWIZZLE_128B, a, b);
    // Equal values (a cancelled sum may be +0 or -0 on either side): the operands as the model reads them.
    CHECK(test::accumulator_mismatches(g, std::vector<double>(c.begin(), c.end())) == 0);
    CHECK(test::accumulator_mismatches(g, integer_product(256)) == 0);
  }
  SECTION("random floats, N 256, 128B: within float's accumulation bound of each other") {
    const std::vector<float> a = random_uniform(64 * kK, -2.0f, 2.0f, 23),
                             b = random_uniform(256 * kK, -2.0f, 2.0f, 24);
    const std::vector<float> g = run_product(*gpu, 256, LAB_SWIZZLE_128B, a, b),
                             c = run_product(*cpu, 256, LAB_SWIZZLE_128B, a, b);
    // Both add the same 32 products, exact in float (11-bit significands; M their magnitude sum, u = 2^-24).
    // The emulator's 31 float additions in k order are each within u M: 31 u M. The tensor cores align a
    // step's products to the largest and may truncate rather than round: allow one float ulp (2 u M) for each
    // of the 32 products and the 4 additions into D, 72 u M. Together 103 u M; operands rounded instead of
    // truncated would move the sums by about 2^-12 of the products, far outside.
    const std::vector<double> magnitude = test::in_accumulator_layout(256, [&](int i, int j) {
      double sum = 0;
      for (int k = 0; k < kK; ++k) sum += std::fabs(double(a[size_t(i) * kK + k]) * b[size_t(j) * kK + k]);
      return sum;
    });
    size_t outside = 0;
    for (size_t i = 0; i < g.size(); ++i)
      outside += !(std::fabs(double(g[i]) - c[i]) <= 103 * 0x1p-24 * magnitude[i]);
    CHECK(outside == 0);
  }
}

TEST_CASE("wgmma tf32: the test kernel compiles with NVRTC for sm_90a to the tf32 wgmma (no GPU needed)",
          "[emulator][wgmma][tf32]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileRequest request{"wgmma_tf32.cu", {}, {"wgmma_tf32_steps<256>", "wgmma_tf32_steps<8>"}, true};
  const CompileResult r = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_90");
  CHECK(r.target == "sm_90a");
  CHECK_THAT(r.ptx, Contains("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32"));
  CHECK_THAT(r.ptx, Contains("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"));
  const std::string sass = disassemble_sass(r);
  UNSCOPED_INFO(sass.substr(sass.find("GMMA") == std::string::npos ? 0 : sass.find("GMMA") - 40, 200));
  CHECK_THAT(sass, Contains("HGMMA.64x256x8.F32.TF32"));
}
