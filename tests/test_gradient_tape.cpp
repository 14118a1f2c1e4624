// GradientTape's concat gradient aliases (a part's gradient as its channel slice of the concat's, no copy):
// a small tape of SiLU convs, a pool and three concats on the cpu emulator, batch 2 (the SiLU backward
// reading an aliased dy with its image stride), against the float64 reference ops: a part with a second,
// earlier-built consumer (aliased), a part whose latest consumer is a later conv (copied), a concat's output
// as a part (copied), a seeded part (copied); the add_planes launches of one backward; a later seed on an
// aliased tensor refused. On the synthetic yolo26n, the add_planes launches of one training pass.
#include <catch2/catch.hpp>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/gradient_tape.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_ops.hpp"
#include "pipeline/reference/ref_traces.hpp"
#include "tests/counting_backend.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;

namespace {

constexpr int kBatch = 2, kHeight = 6, kWidth = 5;

ConvSpec silu_conv(const std::string& name, int c_in, int c_out, int kernel, uint64_t seed) {
  ConvSpec c;
  c.name = name, c.c_in = c_in, c.c_out = c_out, c.kernel = kernel;
  c.weight = random_uniform(size_t(c_out) * c_in * kernel * kernel, -0.5f, 0.5f, seed);
  c.bias = random_uniform(size_t(c_out), -0.3f, 0.3f, seed + 1);
  return c;
}

reference::RefGrad widened(const std::vector<float>& v, int channels) {
  reference::RefGrad g(kBatch, channels, kHeight, kWidth);
  g.values.assign(v.begin(), v.end());
  return g;
}

void add(reference::RefGrad& y, const reference::RefGrad& x) {
  reference::add_inplace(y, x);
}

}  // namespace

TEST_CASE("the gradient tape aliases a concat part's gradient only where the concat is its latest consumer",
          "[gradient_tape]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  test::CountingBackend backend(*cpu);
  const ConvSpec A = silu_conv("A", 3, 4, 3, 10), B = silu_conv("B", 4, 4, 1, 20),
                 D = silu_conv("D", 8, 4, 3, 30), F = silu_conv("F", 4, 4, 1, 40),
                 G = silu_conv("G", 12, 4, 1, 50);
  const std::vector<float> image = random_uniform(size_t(kBatch) * 3 * kHeight * kWidth, -1.0f, 1.0f, 60);
  const std::vector<float> seed_out = random_uniform(size_t(kBatch) * 4 * kHeight * kWidth, -1.0f, 1.0f, 61);
  const std::vector<float> seed_b = random_uniform(size_t(kBatch) * 4 * kHeight * kWidth, -1.0f, 1.0f, 62);

  GradientTape tape(backend);
  const TapeTensor x = tape.input(kBatch, 3, kHeight, kWidth);
  const TapeTensor a = tape.conv(A, x);
  const TapeTensor b = tape.conv(B, a);      // a's earlier consumer: a aliases c's gradient
  const TapeTensor c = tape.concat({a, b});  // b seeded: copied
  const TapeTensor d = tape.conv(D, c);
  const TapeTensor m = tape.maxpool(d, 3);   // d's first consumer
  const TapeTensor e = tape.concat({d, m});  // m aliased; d copied: F reads it later
  const TapeTensor f = tape.conv(F, d);      // d's latest consumer
  const TapeTensor g = tape.concat({e, f});  // f aliased; e (a concat's output) copied
  const TapeTensor out = tape.conv(G, g);
  tape.set_input(x, image);
  tape.forward();
  const DeviceBuffer d_out = backend.upload_vector(seed_out), d_b = backend.upload_vector(seed_b);
  backend.launches.clear();
  tape.backward({{out, &d_out}, {b, &d_b}});
  // The two seeds and the copies of b, d and e (without the aliases: of a, b, d, m, e and f, 8 in all).
  CHECK(backend.launches[kAddPlanesKernel] == 5);

  // The float64 reference: the forward's traces, then the backward from both seeds.
  reference::RefTensor xr(kBatch, 3, kHeight, kWidth);
  xr.values = image;
  const reference::ConvTrace ta = reference::trace_conv(A, xr), tb = reference::trace_conv(B, ta.y);
  const reference::RefTensor cr = reference::concat_channels({&ta.y, &tb.y});
  const reference::ConvTrace td = reference::trace_conv(D, cr);
  const reference::RefTensor mr = reference::maxpool_same(td.y, 3);
  const reference::RefTensor er = reference::concat_channels({&td.y, &mr});
  const reference::ConvTrace tf = reference::trace_conv(F, td.y);
  const reference::RefTensor gr = reference::concat_channels({&er, &tf.y});
  const reference::ConvTrace tg = reference::trace_conv(G, gr);
  reference::ConvGradients want;
  const reference::RefGrad dg = reference::conv2d_backward(G, gr, tg.z, widened(seed_out, 4), want);
  const reference::RefGrad de = reference::slice_grad(dg, 0, 8);
  reference::RefGrad dd = reference::conv2d_backward(F, td.y, tf.z, reference::slice_grad(dg, 8, 4), want);
  add(dd, reference::slice_grad(de, 0, 4));
  add(dd, reference::maxpool_same_backward(td.y, 3, reference::slice_grad(de, 4, 4)));
  const reference::RefGrad dc = reference::conv2d_backward(D, cr, td.z, dd, want);
  reference::RefGrad db = reference::slice_grad(dc, 4, 4);
  add(db, widened(seed_b, 4));
  reference::RefGrad da = reference::slice_grad(dc, 0, 4);
  add(da, reference::conv2d_backward(B, ta.y, tb.z, db, want));
  reference::conv2d_backward(A, xr, ta.z, da, want, false);

  const reference::ConvGradients got = tape.conv_gradients();
  for (const ConvSpec* conv : {&A, &B, &D, &F, &G}) {
    const reference::ConvGradient &gc = got.at(conv->name), &wc = want.at(conv->name);
    const double weight = test::relative_l2(gc.weight, wc.weight), bias = test::relative_l2(gc.bias, wc.bias);
    INFO(conv->name << ": weight " << weight << ", bias " << bias);
    // Float32 kernels against float64 sums: ~1e-7 here; a lost or doubled contribution is O(0.1).
    CHECK(weight < 1e-5);
    CHECK(bias < 1e-5);
  }

  // The aliases are fixed by the first backward: a seed on an aliased gradient is refused.
  CHECK_THROWS_AS(tape.backward({{a, &d_b}}), UsageError);
}

TEST_CASE("one training pass of yolo26n copies no concat part whose gradient aliases the concat's",
          "[gradient_tape]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  test::CountingBackend backend(*cpu);
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const int size = 64;
  TrainingPass pass(backend, model, 1, size, size);
  const std::vector<float> image = random_uniform(size_t(3) * size * size, 0.0f, 1.0f, 70);
  pass.run(image, {{{0, 4, 6, 40, 50}}}, loss::LossConfig{});
  // add_planes only runs in the backward: the 4 seeds, the slices' gradients, the residuals', the
  // contributions added to a live gradient from scratch, and the copies of the 3 concat parts not aliased
  // (the attention blocks' outputs: convs without SiLU). 108 launches before the aliases: 45 parts' copies
  // saved.
  CHECK(backend.launches[kAddPlanesKernel] == 63);
}
