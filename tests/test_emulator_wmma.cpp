// The TF32 warp matrix API on the cpu emulator (nvrtc_runtime/cpu/device/lab_emu_wmma.hpp), checked on
// tests/emulator_kernels/wmma.cu against a float64 matmul in every fragment and memory layout, and
// __float_to_tf32's rounding bit for bit. Like the other semantic tests these run on every available backend,
// so a GPU machine checks the same expectations against the tensor cores.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/compare.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;

namespace {

// float -> tf32, round to nearest with ties away from zero, by arithmetic on the value (not on its bits):
// a normal float keeps 10 mantissa bits, so its tf32 ulp is 2^(exponent - 10).
float tf32_reference(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int exponent = 0;
  std::frexp(double(x), &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, exponent - 1 - 10);
  return float(std::copysign(std::floor(std::fabs(double(x)) / ulp + 0.5) * ulp, double(x)));
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

struct Layouts {
  int a_row, b_row, c_row;
};

}  // namespace

TEST_CASE("emulator: wmma tf32 m16n16k8 matches a float64 matmul in every layout", "[emulator]") {
  const int m = 32, n = 48, kd = 40;
  const std::vector<float> a = random_uniform(size_t(m) * kd, -1.0f, 1.0f, 21);  // logical [m][kd]
  const std::vector<float> b = random_uniform(size_t(kd) * n, -1.0f, 1.0f, 22);  // logical [kd][n]
  const std::vector<float> c0 = random_uniform(size_t(m) * n, -1.0f, 1.0f, 23);  // logical [m][n]
  std::vector<double> ref_tf32(size_t(m) * n), ref_fp32(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double rounded = c0[size_t(i) * n + j], plain = rounded;
      for (int k = 0; k < kd; ++k) {
        const float x = a[size_t(i) * kd + k], y = b[size_t(k) * n + j];
        rounded += double(tf32_reference(x)) * tf32_reference(y);
        plain += double(x) * y;
      }
      ref_tf32[size_t(i) * n + j] = rounded;
      ref_fp32[size_t(i) * n + j] = plain;
    }
  for (const std::string& name : available_backends()) {
    auto backend = make_backend(name, test::emulator_kernels_context());
    auto module = backend->compile(
        {"wmma.cu",
         {},
         {"wmma_matmul<1, 1, 1>", "wmma_matmul<0, 0, 0>", "wmma_matmul<1, 0, 0>", "wmma_matmul<0, 1, 1>"}});
    for (const Layouts l : {Layouts{1, 1, 1}, Layouts{0, 0, 0}, Layouts{1, 0, 0}, Layouts{0, 1, 1}}) {
      const std::string kernel = "wmma_matmul<" + std::to_string(l.a_row) + ", " + std::to_string(l.b_row) +
                                 ", " + std::to_string(l.c_row) + ">";
      INFO("backend " << name << " " << kernel);
      std::vector<float> a_mem(a.size()), b_mem(b.size()), c_mem(c0.size());
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < kd; ++k) a_mem[l.a_row ? i * kd + k : k * m + i] = a[size_t(i) * kd + k];
      for (int k = 0; k < kd; ++k)
        for (int j = 0; j < n; ++j) b_mem[l.b_row ? k * n + j : j * kd + k] = b[size_t(k) * n + j];
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c_mem[l.c_row ? i * n + j : j * m + i] = c0[size_t(i) * n + j];
      DeviceBuffer d_a = backend->upload_vector(a_mem), d_b = backend->upload_vector(b_mem),
                   d_c = backend->upload_vector(c_mem);
      DeviceBuffer d_out = test::poisoned_floats(*backend, c_mem.size());
      void *a_ptr = d_a.get(), *b_ptr = d_b.get(), *c_ptr = d_c.get(), *out_ptr = d_out.get();
      int mm = m, nn = n, kk = kd;
      backend->launch(module->kernel(kernel), {{unsigned(n / 16), unsigned(m / 32), 1}, {64, 1, 1}},
                      kernel_args(a_ptr, b_ptr, c_ptr, out_ptr, mm, nn, kk));
      backend->synchronize();
      const std::vector<float> out_mem = backend->download_vector<float>(d_out, c_mem.size());
      std::vector<float> out(out_mem.size());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) out[size_t(i) * n + j] = out_mem[l.c_row ? i * n + j : j * m + i];
      // Against the product of the tf32-rounded inputs only the float accumulation of 40 O(1) terms differs.
      const OutputCheck exact = make_check("c", {size_t(m), size_t(n)}, out, ref_tf32, Tolerance{1e-5, 1e-4});
      INFO("vs tf32 inputs: rel_l2 " << exact.metrics.rel_l2 << " max_abs " << exact.metrics.max_abs);
      CHECK(exact.metrics.non_finite == 0);
      CHECK(exact.pass);
      // Against the float32 inputs the 10-bit mantissas show: rel_l2 a few 1e-4, never float32's ~1e-7.
      const Metrics plain = compare_arrays(out.data(), ref_fp32.data(), out.size());
      INFO("vs float32 inputs: rel_l2 " << plain.rel_l2);
      CHECK(plain.rel_l2 > 2e-5);
      CHECK(plain.rel_l2 < 2e-3);
    }
  }
}

TEST_CASE("emulator: __float_to_tf32 rounds to 10 mantissa bits, to nearest, ties away from zero",
          "[emulator]") {
  const float ulp = std::ldexp(1.0f, -10), half = std::ldexp(1.0f, -11),
              inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {1.0f + half,                        // tie: away from zero, not to even
                           -(1.0f + half),                     // the same below zero
                           1.0f + ulp + half,                  // tie with an odd last bit
                           std::nextafter(1.0f + half, 0.0f),  // just below a tie: down
                           0.0f,
                           -0.0f,
                           inf,
                           -inf,
                           3.14159265f,
                           1e-30f,
                           -6.5e20f};
  const std::vector<float> random = random_uniform(1000, -100.0f, 100.0f, 24);
  in.insert(in.end(), random.begin(), random.end());
  const std::vector<float> expect_first = {1.0f + ulp, -(1.0f + ulp), 1.0f + 2 * ulp, 1.0f};
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::emulator_kernels_context());
    auto module = backend->compile({"wmma.cu", {}, {"tf32_round"}});
    DeviceBuffer d_in = backend->upload_vector(in);
    DeviceBuffer d_out = test::poisoned_floats(*backend, in.size());
    void *in_ptr = d_in.get(), *out_ptr = d_out.get();
    int count = int(in.size());
    backend->launch(module->kernel("tf32_round"), {{unsigned((count + 63) / 64), 1, 1}, {64, 1, 1}},
                    kernel_args(in_ptr, out_ptr, count));
    backend->synchronize();
    const std::vector<float> out = backend->download_vector<float>(d_out, in.size());
    for (size_t i = 0; i < expect_first.size(); ++i) CHECK(bits_of(out[i]) == bits_of(expect_first[i]));
    size_t wrong = 0, low_bits = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      wrong += bits_of(out[i]) != bits_of(tf32_reference(in[i]));
      low_bits += (bits_of(out[i]) & 0x1fffu) != 0;
    }
    CHECK(wrong == 0);
    CHECK(low_bits == 0);
  }
}
