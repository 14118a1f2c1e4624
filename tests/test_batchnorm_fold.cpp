// The training BatchNorm kernels (kernels/train/batchnorm_fold) against the float64 host fold and chain rule
// (pipeline/model/batchnorm_fold, checked by finite differences in test_reference_backward): a table of convs
// of several shapes (dense 3x3 and 1x1, depthwise, strided, one plain conv without BatchNorm), folded into
// plain and transposed layouts, the chain rule added to gradients already accumulated, the per-conv norms;
// and the fold written in place into Conv2dOp's and Conv2dBackwardOp's own weights, after which the ops
// compute what ops built from the host fold compute. cpu emulator, [gpu] twin on cuda.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/compare.hpp"
#include "kernels/nn/conv2d_backward_op.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/train/batchnorm_fold_op.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

ConvSpec random_conv(const std::string& name, int c_in, int c_out, int kernel, int stride, int groups,
                     bool bn, uint64_t seed) {
  ConvSpec c;
  c.name = name, c.c_in = c_in, c.c_out = c_out, c.kernel = kernel, c.stride = stride, c.groups = groups;
  const size_t weights = size_t(c_out) * (c_in / groups) * kernel * kernel;
  if (!bn) {
    c.weight = random_uniform(weights, -0.5f, 0.5f, seed);
    c.bias = random_uniform(size_t(c_out), -0.5f, 0.5f, seed + 1);
    return c;
  }
  c.conv_weight = random_uniform(weights, -0.5f, 0.5f, seed);
  FrozenBatchNorm n;
  n.gamma = random_uniform(size_t(c_out), 0.2f, 2.0f, seed + 1);
  n.beta = random_uniform(size_t(c_out), -1.0f, 1.0f, seed + 2);
  n.mean = random_uniform(size_t(c_out), -1.0f, 1.0f, seed + 3);
  n.var = random_uniform(size_t(c_out), 0.01f, 3.0f, seed + 4);
  c.bn = n;
  fold_batchnorm(c);
  return c;
}

std::vector<ConvSpec> conv_set() {
  return {random_conv("dense3", 16, 24, 3, 1, 1, true, 10),
          random_conv("pointwise", 40, 200, 1, 1, 1, true, 20),
          random_conv("depthwise", 32, 32, 3, 2, 32, true, 30),
          random_conv("strided", 8, 16, 3, 2, 1, true, 40), random_conv("plain", 24, 7, 1, 1, 1, false, 50)};
}

// The conv's checkpoint parameters and gradients on the device.
struct DeviceConv {
  DeviceBuffer weight, gamma, beta, mean, var;
  DeviceBuffer plain, transposed, bias;         // fold targets
  DeviceBuffer d_folded_weight, d_folded_bias;  // chain-rule inputs
  DeviceBuffer d_weight, d_gamma, d_beta;       // chain-rule outputs (accumulated)
  std::vector<float> h_d_folded_weight, h_d_folded_bias, h_d_weight, h_d_gamma, h_d_beta;  // seeded values
};

FoldConv fold_entry(const ConvSpec& c, DeviceConv& d) {
  const long long taps = (long long)c.kernel * c.kernel, inputs = c.c_in / c.groups;
  FoldConv f{};
  f.weight = d.weight.as<const float>();
  if (c.bn) {
    f.gamma = d.gamma.as<const float>(), f.mean = d.mean.as<const float>(), f.var = d.var.as<const float>();
    f.eps = c.bn->eps;
  }
  f.beta = d.beta.as<const float>();
  f.c_out = c.c_out, f.inputs = int(inputs), f.taps = int(taps);
  f.folded[0] = {d.plain.as<float>(), inputs * taps, taps, 1};
  f.folded[1] = {d.transposed.as<float>(), 1, taps * c.c_out, c.c_out};
  f.folded_bias = d.bias.as<float>();
  f.d_folded_weight = d.d_folded_weight.as<const float>(),
  f.d_folded_bias = d.d_folded_bias.as<const float>();
  f.d_weight = d.d_weight.as<float>(), f.d_beta = d.d_beta.as<float>();
  if (c.bn) f.d_gamma = d.d_gamma.as<float>();
  return f;
}

DeviceConv upload_conv(Backend& backend, const ConvSpec& c, uint64_t seed) {
  DeviceConv d;
  const size_t weights = c.bn ? c.conv_weight.size() : c.weight.size(), n = size_t(c.c_out);
  d.weight = backend.upload_vector(c.bn ? c.conv_weight : c.weight);
  d.beta = backend.upload_vector(c.bn ? c.bn->beta : c.bias);
  if (c.bn) {
    d.gamma = backend.upload_vector(c.bn->gamma), d.mean = backend.upload_vector(c.bn->mean);
    d.var = backend.upload_vector(c.bn->var);
  }
  d.plain = backend.alloc_array<float>(weights), d.transposed = backend.alloc_array<float>(weights);
  d.bias = backend.alloc_array<float>(n);
  d.h_d_folded_weight = random_uniform(weights, -1.0f, 1.0f, seed);
  d.h_d_folded_bias = random_uniform(n, -1.0f, 1.0f, seed + 1);
  d.h_d_weight = random_uniform(weights, -1.0f, 1.0f, seed + 2);  // gradients of an earlier batch
  d.h_d_gamma = random_uniform(n, -1.0f, 1.0f, seed + 3);
  d.h_d_beta = random_uniform(n, -1.0f, 1.0f, seed + 4);
  d.d_folded_weight = backend.upload_vector(d.h_d_folded_weight);
  d.d_folded_bias = backend.upload_vector(d.h_d_folded_bias);
  d.d_weight = backend.upload_vector(d.h_d_weight);
  d.d_gamma = backend.upload_vector(d.h_d_gamma);
  d.d_beta = backend.upload_vector(d.h_d_beta);
  return d;
}

// The fold is the host fold's float64 value rounded once to float32: equal on the emulator; NVRTC may
// contract b' = beta - mean * factor into an FMA, one float32 rounding apart at most.
void check_folded(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    bad += std::fabs(double(got[i]) - double(want[i])) > std::ldexp(std::fabs(double(want[i])), -23);
  INFO(what);
  CHECK(bad == 0);
}

// A chain-rule output: the earlier value plus the float64 gradient, each element within two float32
// roundings (the term's and the sum's) of |earlier| + |term|.
void check_accumulated(const std::vector<float>& got, const std::vector<float>& earlier,
                       const std::vector<double>& term, const std::string& what) {
  REQUIRE(got.size() == term.size());
  size_t bad = 0;
  for (size_t i = 0; i < term.size(); ++i) {
    const double want = double(earlier[i]) + term[i];
    bad += std::fabs(double(got[i]) - want) > 2.5e-7 * (std::fabs(double(earlier[i])) + std::fabs(term[i]));
  }
  INFO(what);
  CHECK(bad == 0);
}

void check_fold_kernels(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const std::vector<ConvSpec> convs = conv_set();
  std::vector<DeviceConv> device;
  std::vector<FoldConv> entries;
  for (size_t i = 0; i < convs.size(); ++i) device.push_back(upload_conv(*backend, convs[i], 100 + 10 * i));
  for (size_t i = 0; i < convs.size(); ++i) entries.push_back(fold_entry(convs[i], device[i]));
  const FoldConvTable table(*backend, entries);
  const BatchnormFoldOp op(*backend);
  op.fold(table);
  op.backward(table);
  DeviceBuffer norms = backend->alloc_array<double>(convs.size());
  op.grad_norms(table, norms.as<double>());
  const std::vector<double> got_norms = backend->download_vector<double>(norms, convs.size());

  for (size_t i = 0; i < convs.size(); ++i) {
    const ConvSpec& c = convs[i];
    const DeviceConv& d = device[i];
    const size_t weights = c.weight.size(), n = size_t(c.c_out);
    // The layouts: plain as the host fold; transposed [inputs * taps, c_out].
    const std::vector<float> plain = backend->download_vector<float>(d.plain, weights);
    const std::vector<float> transposed = backend->download_vector<float>(d.transposed, weights);
    std::vector<float> untransposed(weights);
    const size_t per_out = weights / n;
    for (size_t o = 0; o < n; ++o)
      for (size_t r = 0; r < per_out; ++r) untransposed[o * per_out + r] = transposed[r * n + o];
    check_folded(plain, c.weight, c.name + " folded weight, plain layout");
    check_folded(untransposed, c.weight, c.name + " folded weight, transposed layout");
    check_folded(backend->download_vector<float>(d.bias, n), c.bias, c.name + " folded bias");

    const std::vector<double> dw(d.h_d_folded_weight.begin(), d.h_d_folded_weight.end());
    const std::vector<double> db(d.h_d_folded_bias.begin(), d.h_d_folded_bias.end());
    const std::vector<ParameterGradient> want = conv_parameter_gradients(c, dw, db);
    const std::vector<float> got_w = backend->download_vector<float>(d.d_weight, weights);
    const std::vector<float> got_b = backend->download_vector<float>(d.d_beta, n);
    check_accumulated(got_w, d.h_d_weight, want[0].values, want[0].name);
    double sum = 0;
    for (float v : got_w) sum += double(v) * v;
    for (float v : got_b) sum += double(v) * v;
    if (c.bn) {
      const std::vector<float> got_g = backend->download_vector<float>(d.d_gamma, n);
      check_accumulated(got_g, d.h_d_gamma, want[1].values, want[1].name);
      check_accumulated(got_b, d.h_d_beta, want[2].values, want[2].name);
      for (float v : got_g) sum += double(v) * v;
    } else {
      check_accumulated(got_b, d.h_d_beta, want[1].values, want[1].name);
    }
    // The norm of what the kernel wrote, summed in float64 in another order: equal to ~1e-15.
    CHECK(got_norms[i] == Approx(std::sqrt(sum)).epsilon(1e-12));
  }
}

// Conv2dOp and Conv2dBackwardOp built with zero weights, then folded into in place, compute what ops built
// from the host fold compute (the same float32 weights: equal outputs).
void check_fold_into_ops(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  NnKernels kernels(*backend);
  const std::vector<ConvSpec> convs = conv_set();
  const int batch = 2, h = 12, w = 10;
  for (size_t i = 0; i < convs.size(); ++i) {
    const ConvSpec& c = convs[i];
    const Conv2dShape shape{c.c_in, c.c_out, c.kernel, c.stride, c.groups, true};
    const std::vector<float> zeros(c.weight.size(), 0.0f), zero_bias(size_t(c.c_out), 0.0f);
    const Conv2dOp built(kernels, shape, c.weight, c.bias), folded(kernels, shape, zeros, zero_bias);
    const ConvBackwardVariant variant = choose_conv_backward_variant(shape);
    const Conv2dBackwardOp built_back(*backend, shape, c.weight, variant, std::nullopt);
    const Conv2dBackwardOp folded_back(*backend, shape, zeros, variant, std::nullopt);
    DeviceConv d = upload_conv(*backend, c, 500 + i);
    FoldConv entry = fold_entry(c, d);
    const ConvWeightLayout fwd = folded.weight_layout(), back = folded_back.weight_layout();
    entry.folded[0] = {fwd.data, fwd.out_stride, fwd.in_stride, fwd.tap_stride};
    entry.folded[1] = {back.data, back.out_stride, back.in_stride, back.tap_stride};
    entry.folded_bias = folded.bias_data();
    const FoldConvTable table(*backend, {entry});
    BatchnormFoldOp(*backend).fold(table);

    const int ho = c.out_size(h), wo = c.out_size(w);
    const size_t in_count = size_t(batch) * c.c_in * h * w, out_count = size_t(batch) * c.c_out * ho * wo;
    const DeviceBuffer x = backend->upload_vector(random_uniform(in_count, -1.0f, 1.0f, 600 + i));
    const DeviceBuffer dy = backend->upload_vector(random_uniform(out_count, -1.0f, 1.0f, 700 + i));
    DeviceBuffer y0 = backend->alloc_array<float>(out_count), y1 = backend->alloc_array<float>(out_count);
    DeviceBuffer dx0 = backend->alloc_array<float>(in_count), dx1 = backend->alloc_array<float>(in_count);
    const auto in_view = dense_view(x.as<const float>(), c.c_in, int64_t(h) * w);
    built.run(batch, h, w, in_view, dense_view(y0.as<float>(), c.c_out, int64_t(ho) * wo));
    folded.run(batch, h, w, in_view, dense_view(y1.as<float>(), c.c_out, int64_t(ho) * wo));
    built_back.input_grad(batch, h, w, dy.as<const float>(), dx0.as<float>());
    folded_back.input_grad(batch, h, w, dy.as<const float>(), dx1.as<float>());
    INFO(c.name << ": " << conv_variant_name(folded.variant()));
    CHECK(backend->download_vector<float>(y0, out_count) == backend->download_vector<float>(y1, out_count));
    CHECK(backend->download_vector<float>(dx0, in_count) == backend->download_vector<float>(dx1, in_count));
  }
}

}  // namespace

TEST_CASE("batchnorm_fold: fold, chain rule and gradient norms match the float64 host fold on cpu",
          "[batchnorm_fold]") {
  check_fold_kernels("cpu");
}

TEST_CASE("batchnorm_fold into Conv2dOp's and Conv2dBackwardOp's own weights on cpu", "[batchnorm_fold]") {
  check_fold_into_ops("cpu");
}

TEST_CASE("batchnorm_fold: fold, chain rule and gradient norms on cuda", "[batchnorm_fold][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_fold_kernels("cuda");
}

TEST_CASE("batchnorm_fold into the ops' own weights on cuda", "[batchnorm_fold][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_fold_into_ops("cuda");
}
