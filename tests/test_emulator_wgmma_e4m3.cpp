// The e4m3 side of the wgmma layer (kernels/common/lab_wgmma.cuh; emulator: lab_emu_wgmma.hpp and
// lab_emu_e4m3.hpp), on tests/emulator_kernels/wgmma_e4m3.cu, on every available backend:
//  - the conversions (cvt.rn.satfinite.e4m3x2.f32 and back) against a nearest-code search written here over
//    the format's value table (ties to the even code, saturation at 448, NaN kept);
//  - one m64nNk32 product (SS and RS, no swizzle and 128-byte swizzle) against exact small-integer products,
//    operands composed here from the PTX ISA's layouts;
//  - P fragments from S's accumulators (lab_wgmma_e4m3_a_from_accumulators) times V^T with its keys permuted.
// The [gpu] twin compares the H200 with the emulator: conversions bit for bit over a million floats, and a
// product of random e4m3 operands within the accumulation bound. NVRTC's PTX and SASS of the kernels (no GPU
// needed) hold the e4m3 wgmma and conversions.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/common/lab_swizzle.cuh"
#include "kernels/compare.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"
#include "tests/wgmma_accumulators.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// ---- the format, written from its definition ---------------------------------------------------------------

// The value of a code below 0x7f (sign clear): subnormals m 2^-9, normals (1 + m / 8) 2^(E - 7).
double positive_value(int code) {
  const int e = code >> 3, m = code & 7;
  return e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
}

double code_value(int code) {
  if ((code & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  return (code & 0x80 ? -1 : 1) * positive_value(code & 0x7f);
}

// The code cvt.rn.satfinite gives: the nearest of the 127 finite magnitudes (ties: the even code), at most
// 448; NaN as 0x7f.
int expected_code(float x) {
  if (std::isnan(x)) return 0x7f;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(double(x));
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(positive_value(c) - a), best_d = std::fabs(positive_value(best) - a);
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c;
  }
  return sign | best;
}

uint8_t code_of_integer(int v) {
  return uint8_t(expected_code(float(v)));
}

// ---- runs ------------------------------------------------------------------------------------------------

struct Conversions {
  std::vector<uint16_t> pairs;
  std::vector<float> back;
};

Conversions run_conversions(Backend& backend, const std::vector<float>& in) {
  auto module = backend.compile({"wgmma_e4m3.cu", {}, {"e4m3_convert"}, true});
  int n = int(in.size() / 2);
  DeviceBuffer d_in = backend.upload_vector(in);
  DeviceBuffer d_pairs = backend.upload_vector(std::vector<uint16_t>(size_t(n), 0xdead));
  DeviceBuffer d_back = test::poisoned_floats(backend, 256);
  void *in_ptr = d_in.get(), *pairs_ptr = d_pairs.get(), *back_ptr = d_back.get();
  const unsigned blocks = unsigned(std::max(n, 256) + 255) / 256;
  backend.launch(module->kernel("e4m3_convert"), {{blocks, 1, 1}, {256, 1, 1}},
                 kernel_args(in_ptr, n, pairs_ptr, back_ptr));
  backend.synchronize();
  return {backend.download_vector<uint16_t>(d_pairs, size_t(n)), backend.download_vector<float>(d_back, 256)};
}

// Every code's value, the midpoints between neighbours (ties) and next to them, the saturation edge,
// underflow, zeros, infinities, NaN.
std::vector<float> special_inputs() {
  std::vector<float> in;
  for (int c = 0; c < 0x7f; ++c) {
    const float v = float(positive_value(c));
    in.insert(in.end(), {v, -v});
    if (c < 0x7e) {
      const float mid = float((positive_value(c) + positive_value(c + 1)) / 2);
      in.insert(in.end(), {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  in.insert(in.end(), {448.0f, 449.0f, 463.9f, 464.0f, 465.0f, 480.0f, 1e6f, -1e6f, inf, -inf, 1e-10f, -1e-10f,
                       0x1p-10f, 0x1.8p-9f, 0.0f, -0.0f, std::nanf(""), -std::nanf(""), 3.0e38f, 1e-45f});
  if (in.size() % 2) in.push_back(1.0f);
  return in;
}

// Checks `got` (pairs of codes, the first input in the low byte) against expected_code.
size_t conversion_mismatches(const std::vector<float>& in, const std::vector<uint16_t>& got) {
  size_t wrong = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int code = got[i / 2] >> (8 * (i % 2)) & 0xff, want = expected_code(in[i]);
    const bool ok = std::isnan(in[i]) ? (code & 0x7f) == 0x7f : code == want;
    if (!ok && wrong++ < 8)
      UNSCOPED_INFO("input " << in[i] << ": code 0x" << std::hex << code << ", expected 0x" << want << std::dec);
  }
  return wrong;
}

// ---- one product ------------------------------------------------------------------------------------------

int a_value(int i, int k) {
  return (i * 5 + k * 3) % 7 - 3;
}
int b_value(int k, int n) {
  return (k * 2 + n * 5) % 9 - 4;
}

// The shared image of A [64][32] at 0 and B [N][32] at b_offset, K-major, 1-byte elements: without swizzle
// core matrices of 8 rows x 16 bytes ((i % 8) 16 + (i / 8) SBO + k % 16 + (k / 16) LBO; SBO 128, LBO the
// operand's rows x 16); in the 128-byte swizzle rows of 128 bytes ((i % 8) 128 + (i / 8) SBO + k, SBO 1024,
// then swizzled on the address).
struct ProductImage {
  std::vector<uint8_t> bytes;
  unsigned a_lbo, a_sbo, b_offset, b_lbo, b_sbo;
};

ProductImage product_image(int n, int swizzle, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const bool swizzled = swizzle != LAB_SWIZZLE_NONE;
  ProductImage image{{}, swizzled ? 16u : 1024u, swizzled ? 1024u : 128u, swizzled ? 8192u : 2048u,
                     swizzled ? 16u : unsigned(n) * 16, swizzled ? 1024u : 128u};
  image.bytes.assign(image.b_offset + (swizzled ? size_t(n) / 8 * 1024 : size_t(n) * 32), 0);
  auto put = [&](unsigned start, unsigned lbo, unsigned sbo, int i, int k, uint8_t v) {
    const unsigned offset = swizzled ? start + i % 8 * 128 + i / 8 * sbo + k
                                     : start + i % 8 * 16 + i / 8 * sbo + k % 16 + k / 16 * lbo;
    image.bytes[lab_swizzle_address(swizzle, offset)] = v;
  };
  for (int i = 0; i < 64; ++i)
    for (int k = 0; k < 32; ++k) put(0, image.a_lbo, image.a_sbo, i, k, a[size_t(i) * 32 + k]);
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < 32; ++k) put(image.b_offset, image.b_lbo, image.b_sbo, j, k, b[size_t(j) * 32 + k]);
  return image;
}

// Thread t's A registers (RS form): rows 16 w + g (+ 8), k = 4 q .. 4 q + 3 (+ 16), the lower k in the low byte.
std::vector<uint32_t> a_fragments(const std::vector<uint8_t>& a) {
  std::vector<uint32_t> regs(128 * 4);
  for (int t = 0; t < 128; ++t)
    for (int r = 0; r < 4; ++r) {
      const int row = 16 * (t / 32) + t % 32 / 4 + 8 * (r % 2), k = 4 * (t % 4) + 16 * (r / 2);
      for (int byte = 0; byte < 4; ++byte) regs[t * 4 + r] |= uint32_t(a[size_t(row) * 32 + k + byte]) << 8 * byte;
    }
  return regs;
}

std::vector<float> run_product(Backend& backend, int n, bool rs, int swizzle, const std::vector<uint8_t>& a,
                               const std::vector<uint8_t>& b) {
  const ProductImage image = product_image(n, swizzle, a, b);
  const std::string kernel = "wgmma_e4m3_once<" + std::to_string(n) + ", " + (rs ? "1" : "0") + ">";
  auto module = backend.compile({"wgmma_e4m3.cu", {}, {kernel}, true});
  DeviceBuffer d_image = backend.upload_vector(image.bytes), d_frag = backend.upload_vector(a_fragments(a));
  DeviceBuffer d_out = test::poisoned_floats(backend, size_t(64) * n);
  void *image_ptr = d_image.get(), *frag_ptr = d_frag.get(), *out_ptr = d_out.get();
  int chunks = int(image.bytes.size() / 16), sw = swizzle;
  unsigned a_lbo = image.a_lbo, a_sbo = image.a_sbo, b_offset = image.b_offset, b_lbo = image.b_lbo,
           b_sbo = image.b_sbo;
  backend.launch(module->kernel(kernel), {{1, 1, 1}, {128, 1, 1}, image.bytes.size() + 1024},
                 kernel_args(image_ptr, chunks, frag_ptr, a_lbo, a_sbo, b_offset, b_lbo, b_sbo, sw, out_ptr));
  backend.synchronize();
  return backend.download_vector<float>(d_out, size_t(64) * n);
}

std::vector<uint8_t> integer_matrix(int rows, int (*value)(int, int), bool transposed) {
  std::vector<uint8_t> m(size_t(rows) * 32);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 32; ++k) m[size_t(r) * 32 + k] = code_of_integer(transposed ? value(k, r) : value(r, k));
  return m;
}

// ---- P from S's accumulators ---------------------------------------------------------------------------------

// The key (within 16) that k index j (within 16) of the P fragment stands for: thread q's A bytes 4 q .. 4 q + 3
// hold its accumulator columns 2 q, 2 q + 1, 2 q + 8, 2 q + 9.
int p_key(int j) {
  const int q = j / 4, r = j % 4;
  return 2 * q + r % 2 + 8 * (r / 2);
}

int v_value(int key, int n) {
  return (key * 3 + n * 7) % 7 - 3;
}

std::vector<float> run_attention_step(Backend& backend) {
  // A [64][32] one-hot (A[i][i % 32] = 1), B [64 keys][32] = b_value: S[i][key] = b_value(i % 32, key).
  std::vector<uint8_t> image(5120, 0);
  for (int i = 0; i < 64; ++i) image[i % 8 * 16 + i / 8 * 128 + i % 32 % 16 + i % 32 / 16 * 1024] = code_of_integer(1);
  for (int key = 0; key < 64; ++key)
    for (int k = 0; k < 32; ++k)
      image[2048 + key % 8 * 16 + key / 8 * 128 + k % 16 + k / 16 * 1024] = code_of_integer(b_value(k, key));
  // V^T [16][64 keys] at 4096 (LBO 256, SBO 128), k index kk holding key 16 (kk / 16) + p_key(kk % 16).
  for (int n = 0; n < 16; ++n)
    for (int kk = 0; kk < 64; ++kk)
      image[4096 + n % 8 * 16 + n / 8 * 128 + kk % 16 + kk / 16 * 256] =
          code_of_integer(v_value(16 * (kk / 16) + p_key(kk % 16), n));
  auto module = backend.compile({"wgmma_e4m3.cu", {}, {"wgmma_e4m3_attention"}, true});
  DeviceBuffer d_image = backend.upload_vector(image);
  DeviceBuffer d_out = test::poisoned_floats(backend, 128 * 8);
  void *image_ptr = d_image.get(), *out_ptr = d_out.get();
  int chunks = int(image.size() / 16);
  unsigned a_lbo = 1024, sbo = 128, b_offset = 2048, v_offset = 4096;
  float p_scale = 0.5f;
  backend.launch(module->kernel("wgmma_e4m3_attention"), {{1, 1, 1}, {128, 1, 1}, image.size() + 1024},
                 kernel_args(image_ptr, chunks, a_lbo, sbo, b_offset, a_lbo, sbo, v_offset, p_scale, out_ptr));
  backend.synchronize();
  return backend.download_vector<float>(d_out, 128 * 8);
}

}  // namespace

TEST_CASE("e4m3: conversions round to the nearest code (ties even), saturate at 448, keep NaN",
          "[emulator][wgmma][e4m3]") {
  const std::vector<float> in = special_inputs();
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::emulator_kernels_context());
    const Conversions got = run_conversions(*backend, in);
    CHECK(conversion_mismatches(in, got.pairs) == 0);
    for (int c = 0; c < 256; ++c) {
      INFO("code 0x" << std::hex << c);
      const double want = code_value(c);
      CHECK((std::isnan(want) ? std::isnan(got.back[c]) : double(got.back[c]) == want));
    }
  }
}

TEST_CASE("wgmma e4m3: one m64nNk32 product gives the documented layouts (SS, RS, no swizzle, 128B)",
          "[emulator][wgmma][e4m3]") {
  for (const std::string& name : available_backends()) {
    auto backend = make_backend(name, test::emulator_kernels_context());
    for (const int n : {8, 64, 256})
      for (const bool rs : {false, true})
        for (const int swizzle : {LAB_SWIZZLE_NONE, LAB_SWIZZLE_128B}) {
          INFO("backend " << name << " N " << n << (rs ? " RS" : " SS") << " swizzle " << swizzle);
          const std::vector<float> got = run_product(*backend, n, rs, swizzle, integer_matrix(64, a_value, false),
                                                     integer_matrix(n, b_value, true));
          const std::vector<double> want = test::in_accumulator_layout(n, [](int i, int j) {
            double sum = 0;
            for (int k = 0; k < 32; ++k) sum += a_value(i, k) * b_value(k, j);
            return sum;
          });
          CHECK(test::accumulator_mismatches(got, want) == 0);
        }
  }
}

TEST_CASE("wgmma e4m3: P fragments from S's accumulators times V^T with its keys permuted give P V",
          "[emulator][wgmma][e4m3]") {
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::emulator_kernels_context());
    const std::vector<double> want = test::in_accumulator_layout(16, [](int i, int n) {
      double sum = 0;
      for (int key = 0; key < 64; ++key) sum += 0.5 * b_value(i % 32, key) * v_value(key, n);
      return sum;
    });
    CHECK(test::accumulator_mismatches(run_attention_step(*backend), want) == 0);
  }
}

TEST_CASE("wgmma e4m3: the H200's conversions and products match the emulator's", "[wgmma][e4m3][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto gpu = make_backend("cuda", test::emulator_kernels_context());
  auto cpu = test::emulator_backend();
  SECTION("conversions: bit for bit over a million floats of every magnitude") {
    std::vector<float> in = random_uniform(1 << 20, -1.0f, 1.0f, 7);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::ldexp(in[i], int(i % 40) - 20);
    const Conversions g = run_conversions(*gpu, in), c = run_conversions(*cpu, in);
    size_t differ = 0;
    for (size_t i = 0; i < g.pairs.size(); ++i) differ += g.pairs[i] != c.pairs[i];
    CHECK(differ == 0);
    CHECK(conversion_mismatches(in, g.pairs) == 0);
  }
  SECTION("a product of random e4m3 operands, N 256: within the accumulation bound") {
    std::vector<uint8_t> a(64 * 32), b(256 * 32);
    const std::vector<float> ra = random_uniform(a.size(), -8.0f, 8.0f, 8), rb = random_uniform(b.size(), -8.0f, 8.0f, 9);
    for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(expected_code(ra[i]));
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(expected_code(rb[i]));
    for (const bool rs : {false, true}) {
      INFO((rs ? "RS" : "SS"));
      const std::vector<float> g = run_product(*gpu, 256, rs, LAB_SWIZZLE_128B, a, b),
                               c = run_product(*cpu, 256, rs, LAB_SWIZZLE_128B, a, b);
      // Each output sums 32 exact products; the tensor cores keep fewer bits than float while adding them
      // (about 13: DeepSeek-V3 report, section 3.3.2), so both lie within 32 * 2^-13 of the magnitude sum of the
      // exact sum.
      const std::vector<double> magnitude = test::in_accumulator_layout(256, [&](int i, int j) {
        double sum = 0;
        for (int k = 0; k < 32; ++k) sum += std::fabs(code_value(a[size_t(i) * 32 + k]) * code_value(b[size_t(j) * 32 + k]));
        return sum;
      });
      size_t outside = 0;
      for (size_t i = 0; i < g.size(); ++i) outside += !(std::fabs(g[i] - c[i]) <= 32 * 0x1p-13 * magnitude[i]);
      CHECK(outside == 0);
    }
  }
}

TEST_CASE("wgmma e4m3: the test kernels compile with NVRTC for sm_90a to e4m3 wgmma and cvt (no GPU needed)",
          "[emulator][wgmma][e4m3]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileRequest request{"wgmma_e4m3.cu",
                               {},
                               {"wgmma_e4m3_once<256, 0>", "wgmma_e4m3_once<64, 1>", "wgmma_e4m3_attention",
                                "e4m3_convert"},
                               true};
  const CompileResult r = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_90");
  CHECK(r.target == "sm_90a");
  CHECK_THAT(r.ptx, Contains("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"));
  CHECK_THAT(r.ptx, Contains("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3"));
  CHECK_THAT(r.ptx, Contains("cvt.rn.satfinite.e4m3x2.f32"));
  CHECK_THAT(r.ptx, Contains("cvt.rn.f16x2.e4m3x2"));
  const std::string sass = disassemble_sass(r);
  UNSCOPED_INFO(sass.substr(sass.find("GMMA") == std::string::npos ? 0 : sass.find("GMMA") - 40, 200));
  CHECK_THAT(sass, Contains("QGMMA.64x256x32.F32.E4M3.E4M3"));
}
