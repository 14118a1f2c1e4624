// The fp16 / bfloat16 and tf32 tensor-core primitives of kernels/common/lab_mma.cuh (emulator side:
// nvrtc_runtime/cpu/device/lab_emu_mma.hpp), checked on tests/emulator_kernels/mma.cu: mma m16n8k16 and the
// tf32 m16n8k8 (plain and 3xTF32) against a float64 matmul, lab_to_tf32 against rounding written here,
// ldmatrix x4 / x2 / .trans bit for bit against the documented register layouts, lab_pack2 / lab_to_float
// against conversions written here by arithmetic, and cp.async's zero fill. Like the other semantic tests
// these run on every available backend, so a GPU machine checks the same documented layouts against the
// hardware; the emulator's errors for a divergent mma are checked on the cpu backend.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// A binary floating-point format with 16-bit patterns: fp16 (5 exponent bits, 10 mantissa bits) or bfloat16
// (8, 7). Conversions work on values (frexp, ldexp, floor), never on float bit fields or cuda_fp16.
struct Format {
  int exponent_bits, mantissa_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t infinity() const { return uint16_t(((1u << exponent_bits) - 1) << mantissa_bits); }
  bool is_nan(uint16_t bits) const { return (bits & 0x7fffu) > infinity(); }
};
constexpr Format kF16{5, 10}, kBF16{8, 7};

double value_of(const Format& f, uint16_t bits) {
  const int e = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int m = bits & ((1 << f.mantissa_bits) - 1);
  double v;
  if (e == 0)
    v = std::ldexp(double(m), 1 - f.bias() - f.mantissa_bits);  // subnormal or zero
  else if (e == (1 << f.exponent_bits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(double((1 << f.mantissa_bits) + m), e - f.bias() - f.mantissa_bits);
  return bits & 0x8000u ? -v : v;
}

// x (not NaN) rounded to the nearest pattern of `f`, ties to the even pattern; past the largest finite value
// (after rounding) infinity.
uint16_t round_to(const Format& f, float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(double(x));
  if (std::isinf(a)) return sign | f.infinity();
  const double min_normal = std::ldexp(1.0, 1 - f.bias());
  int exponent = 0;
  std::frexp(a, &exponent);  // a in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, (a < min_normal ? 1 - f.bias() : exponent - 1) - f.mantissa_bits);
  double units = std::floor(a / ulp);
  const double rest = a / ulp - units;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(units, 2.0) == 1.0)) units += 1.0;
  const double v = units * ulp;
  if (v >= std::ldexp(1.0, f.bias() + 1)) return sign | f.infinity();
  if (v < min_normal) return sign | uint16_t(v / std::ldexp(1.0, 1 - f.bias() - f.mantissa_bits));
  std::frexp(v, &exponent);
  const double fraction = v / std::ldexp(1.0, exponent - 1) - 1.0;  // in [0, 1)
  return sign | uint16_t((exponent - 1 + f.bias()) << f.mantissa_bits) |
         uint16_t(fraction * (1 << f.mantissa_bits));
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// Runs one of mma.cu's matmul kernels (a [m][kd], b [kd][n], c0 [m][n]; grid (n / 8, m / 32), block 64) on
// backend `name` and checks c_out against `ref` (float64) within 1e-5 rel_l2 and 5e-5 max_abs.
template <class T>
void check_matmul(const std::string& name, const std::string& kernel, const std::vector<T>& a,
                  const std::vector<T>& b, const std::vector<float>& c0, const std::vector<double>& ref,
                  int m, int n, int kd) {
  auto backend = make_backend(name, test::emulator_kernels_context());
  auto module = backend->compile({"mma.cu", {}, {kernel}});
  DeviceBuffer d_a = backend->upload_vector(a), d_b = backend->upload_vector(b),
               d_c = backend->upload_vector(c0);
  DeviceBuffer d_out = test::poisoned_floats(*backend, c0.size());
  void *a_ptr = d_a.get(), *b_ptr = d_b.get(), *c_ptr = d_c.get(), *out_ptr = d_out.get();
  backend->launch(module->kernel(kernel), {{unsigned(n / 8), unsigned(m / 32), 1}, {64, 1, 1}},
                  kernel_args(a_ptr, b_ptr, c_ptr, out_ptr, n, kd));
  backend->synchronize();
  const std::vector<float> out = backend->download_vector<float>(d_out, c0.size());
  const OutputCheck check = make_check("d", {size_t(m), size_t(n)}, out, ref, Tolerance{1e-5, 5e-5});
  INFO("rel_l2 " << check.metrics.rel_l2 << " max_abs " << check.metrics.max_abs << " at "
                 << check.metrics.worst_index);
  CHECK(check.metrics.non_finite == 0);
  CHECK(check.pass);
}

// How many elements of `out` differ from `expected`; the first 8 are reported, named by where(i).
template <class Where>
size_t count_wrong(const std::vector<uint32_t>& out, const std::vector<uint32_t>& expected, Where where) {
  size_t wrong = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != expected[i] && wrong++ < 8)
      UNSCOPED_INFO(where(i) << ": got 0x" << std::hex << out[i] << " expected 0x" << expected[i]
                             << std::dec);
  return wrong;
}

struct TypeCase {
  int dt;  // LAB_F16 = 0, LAB_BF16 = 1 (the template argument)
  Format format;
  const char* name;
};
const TypeCase kTypes[] = {{0, kF16, "fp16"}, {1, kBF16, "bf16"}};

}  // namespace

TEST_CASE("mma helpers: the test's own fp16 / bf16 conversions round as IEEE specifies", "[emulator]") {
  // Hand-checked patterns, so the reference the other tests trust is itself pinned down.
  CHECK(round_to(kF16, 1.0f) == 0x3c00);
  CHECK(round_to(kF16, 1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie: to even (down)
  CHECK(round_to(kF16, 1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: to even (up)
  CHECK(round_to(kF16, 65504.0f) == 0x7bff);
  CHECK(round_to(kF16, 65519.99f) == 0x7bff);
  CHECK(round_to(kF16, 65520.0f) == 0x7c00);  // tie between 65504 and 2^16: to even, overflows
  CHECK(round_to(kF16, -1e6f) == 0xfc00);
  CHECK(round_to(kF16, std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(round_to(kF16, std::ldexp(1.0f, -25)) == 0x0000);      // tie: to even zero
  CHECK(round_to(kF16, 3 * std::ldexp(1.0f, -25)) == 0x0002);  // tie: to even
  CHECK(round_to(kF16, -0.0f) == 0x8000);
  CHECK(round_to(kBF16, 1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(round_to(kBF16, 1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(round_to(kBF16, std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(round_to(kBF16, -std::numeric_limits<float>::denorm_min()) == 0x8000);
  CHECK(value_of(kF16, 0x7bff) == 65504.0);
  CHECK(value_of(kF16, 0x0001) == std::ldexp(1.0, -24));
  CHECK(value_of(kBF16, 0xc040) == -3.0);
  CHECK(std::isnan(value_of(kBF16, 0x7fc1)));
}

TEST_CASE("emulator: mma m16n8k16 (fp16, bf16) matches a float64 matmul in the documented layouts",
          "[emulator]") {
  const int m = 64, n = 24, kd = 48;
  const std::vector<float> a_values = random_uniform(size_t(m) * kd, -1.0f, 1.0f, 61);  // [m][kd]
  const std::vector<float> b_values = random_uniform(size_t(kd) * n, -1.0f, 1.0f, 62);  // [kd][n]
  const std::vector<float> c0 = random_uniform(size_t(m) * n, -1.0f, 1.0f, 63);         // [m][n]
  for (const TypeCase& type : kTypes) {
    std::vector<uint16_t> a(a_values.size()), b(b_values.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = round_to(type.format, a_values[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = round_to(type.format, b_values[i]);
    std::vector<double> ref(size_t(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double sum = c0[size_t(i) * n + j];
        for (int k = 0; k < kd; ++k)
          sum += value_of(type.format, a[size_t(i) * kd + k]) * value_of(type.format, b[size_t(k) * n + j]);
        ref[size_t(i) * n + j] = sum;
      }
    const std::string kernel = "mma_matmul<" + std::to_string(type.dt) + ">";
    for (const std::string& name : available_backends()) {
      INFO("backend " << name << " " << kernel << " (" << type.name << ")");
      // The products of 16-bit inputs are exact in float, so only the float accumulation differs from the
      // float64 reference: 48 products of magnitude <= 1 plus c, each sum rounded to float (2^-24 relative),
      // on outputs of magnitude a few units. Worst case a few 1e-6 absolute, typically ~1e-7; the tensor
      // cores' own accumulation order stays in the same range (check_matmul's 1e-5 rel_l2, 5e-5 max_abs). A
      // wrong lane or register mapping, or a wrong element type, is off by O(0.1-1).
      check_matmul(name, kernel, a, b, c0, ref, m, n, kd);
    }
  }
}

namespace {

// x (finite, normal) rounded to tf32's 11 significant bits, to nearest, ties away from zero (cvt.rna).
float round_to_tf32(float x) {
  int exponent = 0;
  std::frexp(double(x), &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, exponent - 11), a = std::fabs(double(x));
  double units = std::floor(a / ulp);
  if (a / ulp - units >= 0.5) units += 1.0;
  return float(std::copysign(units * ulp, double(x)));
}

// c + a b for row-major a [m][kd], b [kd][n], c [m][n], in float64.
std::vector<double> matmul_reference(const std::vector<float>& a, const std::vector<float>& b,
                                     const std::vector<float>& c, int m, int n, int kd) {
  std::vector<double> ref(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = c[size_t(i) * n + j];
      for (int k = 0; k < kd; ++k) sum += double(a[size_t(i) * kd + k]) * double(b[size_t(k) * n + j]);
      ref[size_t(i) * n + j] = sum;
    }
  return ref;
}

}  // namespace

TEST_CASE("emulator: lab_to_tf32 rounds to nearest, ties away from zero", "[emulator]") {
  const float one_ulp = std::ldexp(1.0f, -10);  // tf32's ulp at 1
  std::vector<float> in = {1.0f,
                           1.0f + one_ulp / 2,     // tie: away (up)
                           -(1.0f + one_ulp / 2),  // tie: away (down)
                           1.0f + one_ulp / 2 - std::ldexp(1.0f, -23),
                           2.0f - std::ldexp(1.0f, -23),  // carries into the exponent
                           std::numeric_limits<float>::infinity()};
  const std::vector<float> random = random_uniform(4096, -1e3f, 1e3f, 64);
  in.insert(in.end(), random.begin(), random.end());
  std::vector<uint32_t> expected(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    expected[i] = bits_of(std::isinf(in[i]) ? in[i] : round_to_tf32(in[i]));
  CHECK(float_of(expected[1]) == 1.0f + one_ulp);
  CHECK(float_of(expected[2]) == -(1.0f + one_ulp));
  CHECK(float_of(expected[3]) == 1.0f);
  CHECK(float_of(expected[4]) == 2.0f);
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::emulator_kernels_context());
    auto module = backend->compile({"mma.cu", {}, {"tf32_convert"}});
    DeviceBuffer d_in = backend->upload_vector(in);
    DeviceBuffer d_out = backend->upload_vector(std::vector<uint32_t>(in.size(), 0xffffffffu));
    void *in_ptr = d_in.get(), *out_ptr = d_out.get();
    int count = int(in.size());
    backend->launch(module->kernel("tf32_convert"), {{unsigned((in.size() + 63) / 64), 1, 1}, {64, 1, 1}},
                    kernel_args(in_ptr, out_ptr, count));
    backend->synchronize();
    const std::vector<uint32_t> out = backend->download_vector<uint32_t>(d_out, in.size());
    CHECK(count_wrong(out, expected, [&](size_t i) { return "input " + std::to_string(in[i]); }) == 0);
  }
}

TEST_CASE(
    "emulator: mma m16n8k8 tf32 matches a float64 matmul in the documented layouts, 3xTF32 to float32 level",
    "[emulator]") {
  const int m = 64, n = 24, kd = 48;
  const std::vector<float> a_values = random_uniform(size_t(m) * kd, -1.0f, 1.0f, 65);  // [m][kd]
  const std::vector<float> b_values = random_uniform(size_t(kd) * n, -1.0f, 1.0f, 66);  // [kd][n]
  const std::vector<float> c0 = random_uniform(size_t(m) * n, -1.0f, 1.0f, 67);         // [m][n]
  std::vector<float> a_tf32(a_values.size()), b_tf32(b_values.size());
  for (size_t i = 0; i < a_tf32.size(); ++i) a_tf32[i] = round_to_tf32(a_values[i]);
  for (size_t i = 0; i < b_tf32.size(); ++i) b_tf32[i] = round_to_tf32(b_values[i]);
  // split false: tf32 inputs, products exact in float, so only the float accumulation differs (as for
  // m16n8k16 above). split true, 3xTF32 on the unrounded inputs: each product loses at most ~3 * 2^-22 of its
  // size (the dropped lo * lo and the rounding of lo), about 1e-6 relative over 48 terms; one plain tf32
  // product of the same inputs is off by up to 2^-11 each, rel_l2 about 2e-4, so the 1e-5 below tells the two
  // apart.
  for (const bool split : {false, true}) {
    const std::vector<float>&a = split ? a_values : a_tf32, &b = split ? b_values : b_tf32;
    const std::vector<double> ref = matmul_reference(a, b, c0, m, n, kd);
    const std::string kernel = std::string("mma_tf32_matmul<") + (split ? "true" : "false") + ">";
    for (const std::string& name : available_backends()) {
      INFO("backend " << name << " " << kernel);
      check_matmul(name, kernel, a, b, c0, ref, m, n, kd);
    }
  }
}

TEST_CASE("emulator: ldmatrix x4, x2 and .trans deliver the documented per-lane registers", "[emulator]") {
  // A 32 x 24 tile of distinct values; lane l points at row (11 l + 7) % 32, 8-element chunk 5 l % 3, so the
  // rows of each matrix come from scattered places.
  std::vector<uint16_t> tile(32 * 24);
  for (size_t i = 0; i < tile.size(); ++i) tile[i] = uint16_t(i ^ 0xa5a5u);
  std::vector<int> offsets(32);
  for (int l = 0; l < 32; ++l) offsets[l] = (11 * l + 7) % 32 * 24 + 8 * (5 * l % 3);
  // M_i[row][col] = tile[offsets[8 i + row] + col]; lane l = 4 g + t.
  auto element = [&](int i, int row, int col) { return uint32_t(tile[offsets[8 * i + row] + col]); };
  std::vector<uint32_t> expected(32 * 12);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
      const uint32_t plain = element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
      const uint32_t trans = element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16;
      expected[l * 12 + i] = plain;
      expected[l * 12 + 4 + i] = trans;
      if (i < 2) {
        expected[l * 12 + 8 + i] = plain;
        expected[l * 12 + 10 + i] = trans;
      }
    }
  }
  const char* const form[12] = {"x4 r0",       "x4 r1",       "x4 r2", "x4 r3", "x4.trans r0", "x4.trans r1",
                                "x4.trans r2", "x4.trans r3", "x2 r0", "x2 r1", "x2.trans r0", "x2.trans r1"};
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::emulator_kernels_context());
    auto module = backend->compile({"mma.cu", {}, {"ldmatrix_all"}});
    DeviceBuffer d_tile = backend->upload_vector(tile), d_offsets = backend->upload_vector(offsets);
    DeviceBuffer d_out = backend->upload_vector(std::vector<uint32_t>(expected.size(), 0xffffffffu));
    void *tile_ptr = d_tile.get(), *offsets_ptr = d_offsets.get(), *out_ptr = d_out.get();
    backend->launch(module->kernel("ldmatrix_all"), {{1, 1, 1}, {32, 1, 1}},
                    kernel_args(tile_ptr, offsets_ptr, out_ptr));
    backend->synchronize();
    const std::vector<uint32_t> out = backend->download_vector<uint32_t>(d_out, expected.size());
    CHECK(count_wrong(out, expected,
                      [&](size_t i) { return "lane " + std::to_string(i / 12) + " " + form[i % 12]; }) == 0);
  }
}

TEST_CASE("emulator: lab_pack2 rounds to nearest even and lab_to_float round-trips every pattern",
          "[emulator]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const TypeCase& type : kTypes) {
    const Format& f = type.format;
    const float ulp_at_one = std::ldexp(1.0f, -f.mantissa_bits), half_ulp = ulp_at_one / 2;
    // Every non-NaN pattern of the type as a float: must come back as the same pattern and value.
    std::vector<uint16_t> patterns;
    std::vector<float> in;
    for (uint32_t bits = 0; bits < 0x10000u; ++bits)
      if (!f.is_nan(uint16_t(bits))) {
        patterns.push_back(uint16_t(bits));
        in.push_back(float(value_of(f, uint16_t(bits))));
      }
    // Ties, overflow, subnormals, NaN and infinities.
    for (const float v : {1.0f + half_ulp,
                          1.0f + 3 * half_ulp,
                          -(1.0f + half_ulp),
                          std::nextafter(1.0f + half_ulp, 2.0f),
                          std::nextafter(1.0f + half_ulp, 0.0f),
                          65519.99f,
                          65520.0f,
                          1e6f,
                          -1e6f,
                          3e38f,
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          inf,
                          -inf,
                          nan,
                          -nan,
                          0.0f,
                          -0.0f,
                          std::ldexp(1.0f, -25),
                          3 * std::ldexp(1.0f, -25),
                          std::ldexp(1.0f, -134),
                          std::ldexp(3.0f, -134),
                          1e-40f,
                          -1e-45f,
                          6.1e-5f,
                          1.17e-38f})
      in.push_back(v);
    // Random float bit patterns: every exponent, NaNs included.
    std::mt19937 rng(64);
    for (int i = 0; i < 20000; ++i) in.push_back(float_of(uint32_t(rng())));
    if (in.size() % 2) in.push_back(1.0f);
    const int pairs = int(in.size() / 2);
    const std::string kernel = "pack_convert<" + std::to_string(type.dt) + ">";
    for (const std::string& name : available_backends()) {
      INFO("backend " << name << " " << kernel << " (" << type.name << ")");
      auto backend = make_backend(name, test::emulator_kernels_context());
      auto module = backend->compile({"mma.cu", {}, {kernel}});
      DeviceBuffer d_in = backend->upload_vector(in);
      DeviceBuffer d_packed = backend->upload_vector(std::vector<uint32_t>(size_t(pairs), 0xdeadbeefu));
      DeviceBuffer d_back = test::poisoned_floats(*backend, in.size());
      void *in_ptr = d_in.get(), *packed_ptr = d_packed.get(), *back_ptr = d_back.get();
      int count = pairs;
      backend->launch(module->kernel(kernel), {{unsigned((pairs + 63) / 64), 1, 1}, {64, 1, 1}},
                      kernel_args(in_ptr, packed_ptr, back_ptr, count));
      backend->synchronize();
      const std::vector<uint32_t> packed = backend->download_vector<uint32_t>(d_packed, size_t(pairs));
      const std::vector<float> back = backend->download_vector<float>(d_back, in.size());
      size_t wrong_bits = 0, wrong_back = 0, round_trip = 0;
      for (size_t j = 0; j < in.size(); ++j) {
        const uint16_t got = uint16_t(j % 2 ? packed[j / 2] >> 16 : packed[j / 2] & 0xffffu);
        bool ok_bits, ok_back;
        if (std::isnan(in[j])) {
          ok_bits = f.is_nan(got);
          ok_back = std::isnan(back[j]);
        } else {
          const uint16_t want = round_to(f, in[j]);
          ok_bits = got == want;
          ok_back = bits_of(back[j]) == bits_of(float(value_of(f, want)));
          if (j < patterns.size()) round_trip += got == patterns[j] && bits_of(back[j]) == bits_of(in[j]);
        }
        if (!ok_bits && wrong_bits++ < 8)
          UNSCOPED_INFO("in " << in[j] << " (0x" << std::hex << bits_of(in[j]) << "): got 0x" << got
                              << std::dec);
        wrong_back += !ok_back;
      }
      CHECK(wrong_bits == 0);
      CHECK(wrong_back == 0);
      CHECK(round_trip == patterns.size());
    }
  }
}

TEST_CASE("emulator: cp.async copies 16 bytes, or zero-fills without reading the source", "[emulator]") {
  const int total = 512, valid = 300;
  const std::vector<float> src = random_uniform(size_t(valid) * 4, 1.0f, 2.0f, 65);
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    // On the cpu backend the source ends at a guard page: a read past `valid` would fault.
    auto backend = make_backend(name, test::emulator_kernels_context(/*check_bounds=*/name == "cpu"));
    auto module = backend->compile({"mma.cu", {}, {"cp_async_fill"}});
    DeviceBuffer d_src = backend->upload_vector(src);
    DeviceBuffer d_out = test::poisoned_floats(*backend, size_t(total) * 4);
    void *src_ptr = d_src.get(), *out_ptr = d_out.get();
    int count = valid;
    backend->launch(module->kernel("cp_async_fill"), {{1, 1, 1}, {128, 1, 1}},
                    kernel_args(src_ptr, out_ptr, count));
    backend->synchronize();
    const std::vector<float> out = backend->download_vector<float>(d_out, size_t(total) * 4);
    size_t wrong = 0;
    for (size_t i = 0; i < out.size(); ++i)
      wrong += bits_of(out[i]) != (i < src.size() ? bits_of(src[i]) : 0u);
    CHECK(wrong == 0);
  }
}

TEST_CASE("lab_mma.cuh compiles with NVRTC for sm_90 to mma.sync, ldmatrix and cp.async (no GPU needed)",
          "[emulator]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileResult r =
      compile_with_nvrtc(*ctx.tree, *ctx.cache,
                         {"mma.cu",
                          {},
                          {"mma_matmul<0>", "mma_matmul<1>", "ldmatrix_all", "pack_convert<0>",
                           "pack_convert<1>", "cp_async_fill", "mma_tf32_matmul<true>", "tf32_convert"}},
                         "sm_90");
  for (const char* instruction :
       {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32",
        "cp.async.cg.shared.global", "cp.async.wait_group 1",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32"})
    CHECK_THAT(r.ptx, Contains(instruction));
}

TEST_CASE("emulator: an mma reached by only some lanes of a warp is an error at its line", "[emulator]") {
  auto backend = test::emulator_backend();
  auto module = backend->compile({"mma.cu", {}, {"mma_divergent"}});
  DeviceBuffer out = test::poisoned_floats(*backend, 32);
  void* out_ptr = out.get();
  auto launch = [&](int mode) -> std::string {
    try {
      backend->launch(module->kernel("mma_divergent"), {{1, 1, 1}, {32, 1, 1}}, kernel_args(out_ptr, mode));
    } catch (const RuntimeError& e) {
      return e.what();
    }
    return {};
  };
  SECTION("the other lanes have exited") {
    const std::string message = launch(0);
    INFO(message);
    CHECK_THAT(message,
               Contains("kernel mma_divergent block (0,0,0): thread (0,0,0) at mma.cu:147: "
                        "lab_mma_16816 is a warp collective of all 32 lanes, but lanes 0xffff0000 of "
                        "the warp are not in this call"));
  }
  SECTION("the other lanes wait at a __syncwarp") {
    const std::string message = launch(1);
    INFO(message);
    CHECK_THAT(message,
               Contains("at mma.cu:147: lab_mma_16816 is a warp collective of all 32 lanes, but lanes "
                        "0xffff0000 of the warp are not in this call"));
  }
  SECTION("the other lanes wait at a barrier") {
    const std::string message = launch(2);
    INFO(message);
    CHECK_THAT(message, Contains("kernel mma_divergent block (0,0,0): warp collective never completes: "
                                 "threads 0-15 wait at __syncwarp (mma.cu:147, mask 0xffffffff)"));
    CHECK_THAT(message, Contains("threads 16-31 of its mask wait at __syncthreads (mma.cu:145)"));
  }
}
