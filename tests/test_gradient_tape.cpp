// GradientTape's views: concat gradient aliases (a part's gradient as its channel slice of the concat's, no
// copy): a small tape of SiLU convs, a pool and three concats on the cpu emulator, batch 2 (the SiLU backward
// reading an aliased dy with its image stride), against the float64 reference ops: a part with a second,
// earlier-built consumer (aliased), a part whose latest consumer is a later conv (copied), a concat's output
// as a part (copied), a seeded part (copied); the add_planes launches of one backward; a later seed on an
// aliased tensor refused. Values placed in their concat's and anchors' buffers, sliced and residual gradient
// aliases, on C3k2's pattern against the reference. On the synthetic yolo26n, the copy_planes and add_planes
// launches of one training pass. SiLU backwards folded into their reader's input gradient.
#include <catch2/catch.hpp>

#include <algorithm>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/gradient_tape.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_ops.hpp"
#include "pipeline/reference/ref_traces.hpp"
#include "tests/counting_backend.hpp"
#include "tests/delayed_lanes_backend.hpp"
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
  // b's seed (out's, on a tensor nothing else adds to, is read in place) and the copies of b, d and e
  // (without the aliases: of a, b, d, m, e and f, 8 in all; with out's seed copied, 5).
  CHECK(backend.launches[kAddPlanesKernel] == 4);

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

// C3k2's pattern and the head's: ya = A(x) split into halves a, b; u = C(B(b)) + b; e = E(D(u)) + u (u's
// gradient is e's); f = F(e) + e (a conv's own input as its residual: copied); g = [a, b, f] (ya and f placed
// in g's buffer, ya's gradient g's channels 0..4); two non-SiLU convs of g into anchors (placed). Against the
// float64 reference, with the copies and sums each pass makes.
TEST_CASE(
    "the gradient tape places slices, concat parts and anchor levels in place and aliases residual and "
    "sliced gradients",
    "[gradient_tape]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  test::CountingBackend backend(*cpu);
  const ConvSpec A = silu_conv("A", 3, 4, 3, 110), B = silu_conv("B", 2, 2, 3, 120),
                 C = silu_conv("C", 2, 2, 1, 130), D = silu_conv("D", 2, 2, 3, 140),
                 E = silu_conv("E", 2, 2, 1, 150), F = silu_conv("F", 2, 2, 3, 160);
  ConvSpec G1 = silu_conv("G1", 6, 4, 1, 170), G2 = silu_conv("G2", 6, 4, 3, 180);
  G1.silu = G2.silu = false;
  const std::vector<float> image = random_uniform(size_t(kBatch) * 3 * kHeight * kWidth, -1.0f, 1.0f, 190);
  const int plane = kHeight * kWidth;
  const std::vector<float> seed = random_uniform(size_t(kBatch) * 4 * 2 * plane, -1.0f, 1.0f, 191);

  GradientTape tape(backend);
  const TapeTensor x = tape.input(kBatch, 3, kHeight, kWidth);
  const TapeTensor ya = tape.conv(A, x);
  const TapeTensor a = tape.slice(ya, 0, 2), b = tape.slice(ya, 2, 2);
  const TapeTensor u = tape.conv(C, tape.conv(B, b), &b);
  const TapeTensor e = tape.conv(E, tape.conv(D, u), &u);
  const TapeTensor f = tape.conv(F, e, &e);
  const TapeTensor g = tape.concat({a, b, f});
  const TapeTensor out = tape.anchors({tape.conv(G1, g), tape.conv(G2, g)});
  tape.set_input(x, image);
  backend.launches.clear();
  tape.forward();
  CHECK(backend.launches[kCopyPlanesKernel] == 0);  // 5 without the placements: 3 parts, 2 levels
  const DeviceBuffer d_out = backend.upload_vector(seed);
  backend.launches.clear();
  tape.backward({{out, &d_out}});
  // The two levels' gradients, e's and b's residual sums (the seed is read in place: one more copied; 8
  // without the aliases: u's residual sum and the two slices' copies into ya's gradient).
  CHECK(backend.launches[kAddPlanesKernel] == 4);

  using namespace reference;
  RefTensor xr(kBatch, 3, kHeight, kWidth);
  xr.values = image;
  const ConvTrace ta = trace_conv(A, xr);
  const RefTensor ar = slice_channels(ta.y, 0, 2), br = slice_channels(ta.y, 2, 2);
  const ConvTrace tb = trace_conv(B, br);
  ConvTrace tc = trace_conv(C, tb.y);
  add_inplace(tc.y, br);
  const ConvTrace td = trace_conv(D, tc.y);
  ConvTrace te = trace_conv(E, td.y);
  add_inplace(te.y, tc.y);
  ConvTrace tf = trace_conv(F, te.y);
  add_inplace(tf.y, te.y);
  const RefTensor gr = concat_channels({&ar, &br, &tf.y});
  const ConvTrace t1 = trace_conv(G1, gr), t2 = trace_conv(G2, gr);
  RefGrad d1(kBatch, 4, kHeight, kWidth), d2(kBatch, 4, kHeight, kWidth);  // the anchors' halves
  for (int i = 0; i < kBatch * 4; ++i)
    for (int p = 0; p < plane; ++p) {
      d1.values[size_t(i) * plane + p] = seed[size_t(i) * 2 * plane + p];
      d2.values[size_t(i) * plane + p] = seed[size_t(i) * 2 * plane + plane + p];
    }
  ConvGradients want;
  RefGrad dg = conv2d_backward(G1, gr, t1.z, d1, want);
  add(dg, conv2d_backward(G2, gr, t2.z, d2, want));
  RefGrad de = slice_grad(dg, 4, 2);
  add(de, conv2d_backward(F, te.y, tf.z, slice_grad(dg, 4, 2), want));
  RefGrad du = de;
  add(du, conv2d_backward(D, tc.y, td.z, conv2d_backward(E, td.y, te.z, de, want), want));
  RefGrad db = slice_grad(dg, 2, 2);
  add(db, du);
  add(db, conv2d_backward(B, br, tb.z, conv2d_backward(C, tb.y, tc.z, du, want), want));
  const RefGrad da = slice_grad(dg, 0, 2);
  const RefGrad dya = concat_grads({&da, &db});
  conv2d_backward(A, xr, ta.z, dya, want, false);

  const ConvGradients got = tape.conv_gradients();
  for (const ConvSpec* conv : std::vector<const ConvSpec*>{&A, &B, &C, &D, &E, &F, &G1, &G2}) {
    const ConvGradient &gc = got.at(conv->name), &wc = want.at(conv->name);
    const double weight = test::relative_l2(gc.weight, wc.weight), bias = test::relative_l2(gc.bias, wc.bias);
    INFO(conv->name << ": weight " << weight << ", bias " << bias);
    CHECK(weight < 1e-5);  // float32 kernels against float64 sums; a lost or doubled contribution is O(0.1)
    CHECK(bias < 1e-5);
  }
  // The forward's values, too: the anchors' levels written in place by G1 and G2.
  const std::vector<float> values = backend.download_vector<float>(tape.buffer(out), seed.size());
  std::vector<float> want_values(seed.size());
  for (int i = 0; i < kBatch * 4; ++i)
    for (int p = 0; p < plane; ++p) {
      want_values[size_t(i) * 2 * plane + p] = t1.y.values[size_t(i) * plane + p];
      want_values[size_t(i) * 2 * plane + plane + p] = t2.y.values[size_t(i) * plane + p];
    }
  CHECK(test::relative_l2(values, want_values) < 1e-6);
  CHECK_THROWS_AS(tape.buffer(a), UsageError);  // a view has no buffer of its own
}

// The SiLU backward folded into the input gradient (fold_silu_backwards): a = A(x) read only by the 1x1 B
// and c = C(b) read only by the depthwise E get theirs from B's and E's input-gradient epilogues (convs), d
// = D(b) read only by the stride-2 K from K's conv2d_dgrad epilogue; b (two readers) and the seeded e and k
// keep their conv2d_silu_bias_backward pass. Against the float64 reference, at float32 and fp16.
TEST_CASE(
    "a SiLU conv's backward runs in its one reader's input-gradient conv where that is its whole gradient",
    "[gradient_tape]") {
  const Precision precision = GENERATE(Precision::Fp32, Precision::Fp16);
  auto cpu = make_backend("cpu", test::embedded_context());
  test::CountingBackend backend(*cpu);
  ConvSpec A = silu_conv("A", 3, 4, 3, 110), B = silu_conv("B", 4, 4, 1, 120),
           C = silu_conv("C", 4, 4, 1, 130), D = silu_conv("D", 4, 4, 1, 140),
           E = silu_conv("E", 4, 4, 3, 150), K = silu_conv("K", 4, 4, 3, 160);
  E.groups = 4;
  E.weight.resize(4 * 9);
  K.stride = 2;
  const int hk = K.out_size(kHeight), wk = K.out_size(kWidth);
  const std::vector<float> image = random_uniform(size_t(kBatch) * 3 * kHeight * kWidth, -1.0f, 1.0f, 170);
  const std::vector<float> seed_e = random_uniform(size_t(kBatch) * 4 * kHeight * kWidth, -1.0f, 1.0f, 171);
  const std::vector<float> seed_k = random_uniform(size_t(kBatch) * 4 * hk * wk, -1.0f, 1.0f, 172);

  GradientTape tape(backend, precision);
  const TapeTensor x = tape.input(kBatch, 3, kHeight, kWidth);
  const TapeTensor a = tape.conv(A, x), b = tape.conv(B, a), c = tape.conv(C, b), e = tape.conv(E, c);
  const TapeTensor d = tape.conv(D, b), k = tape.conv(K, d);
  tape.set_input(x, image);
  tape.forward();
  const DeviceBuffer d_e = backend.upload_vector(seed_e), d_k = backend.upload_vector(seed_k);
  backend.launches.clear();
  tape.backward({{e, &d_e}, {k, &d_k}});
  CHECK(backend.launches["conv2d_silu_bias_backward"] == 3);  // B, E, K; 6 unfolded

  reference::RefTensor xr(kBatch, 3, kHeight, kWidth);
  xr.values = image;
  const reference::ConvTrace ta = reference::trace_conv(A, xr), tb = reference::trace_conv(B, ta.y),
                             tc = reference::trace_conv(C, tb.y), te = reference::trace_conv(E, tc.y),
                             td = reference::trace_conv(D, tb.y), tk = reference::trace_conv(K, td.y);
  reference::ConvGradients want;
  reference::RefGrad dk(kBatch, 4, hk, wk);
  dk.values.assign(seed_k.begin(), seed_k.end());
  reference::RefGrad db =
      reference::conv2d_backward(D, tb.y, td.z, reference::conv2d_backward(K, td.y, tk.z, dk, want), want);
  const reference::RefGrad dc = reference::conv2d_backward(E, tc.y, te.z, widened(seed_e, 4), want);
  add(db, reference::conv2d_backward(C, tb.y, tc.z, dc, want));
  const reference::RefGrad da = reference::conv2d_backward(B, ta.y, tb.z, db, want);
  reference::conv2d_backward(A, xr, ta.z, da, want, false);

  const reference::ConvGradients got = tape.conv_gradients();
  for (const ConvSpec* conv : {&A, &B, &C, &D, &E, &K}) {
    const reference::ConvGradient &gc = got.at(conv->name), &wc = want.at(conv->name);
    const double weight = test::relative_l2(gc.weight, wc.weight), bias = test::relative_l2(gc.bias, wc.bias);
    INFO(conv->name << ": weight " << weight << ", bias " << bias);
    // Float32: ~1e-7 (a missing or doubled SiLU derivative is O(0.1)); fp16 rounds the products' operands to
    // 11 significant bits, ~1e-3 after the chain of six convs.
    const double bar = precision == Precision::Fp32 ? 1e-5 : 1e-2;
    CHECK(weight < bar);
    CHECK(bias < bar);
  }
}

TEST_CASE("one training pass of yolo26n copies no concat part it can place or alias", "[gradient_tape]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  test::CountingBackend backend(*cpu);
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const int size = 64;
  TrainingPass pass(backend, model, 1, size, size);
  const std::vector<float> image = random_uniform(size_t(3) * size * size, 0.0f, 1.0f, 70);
  pass.run(image, {{{0, 4, 6, 40, 50}}}, loss::LossConfig{});
  // add_planes only runs in the backward: the 12 anchor levels' gradients (the 4 seeds, on the heads'
  // outputs, are read in place: 4 more before), the residual sums into a live gradient, the contributions
  // added from scratch, the copies of the concat parts not aliased (the attention blocks' outputs: convs
  // without SiLU) and of C2PSA's slices. 108 launches before any alias, 63 with the concat parts' alone (the
  // sliced and residual aliases save 33 more), 26 since the input gradients of the stride-2 and depthwise
  // convs add themselves into a live gradient (4 more).
  CHECK(backend.launches[kAddPlanesKernel] == 22);
  // copy_planes: only C2PSA's first half into its concat (cv1's output cannot be placed: the concat's other
  // half is the attention's); 60 without the placements (and before that each of the 18 slices copied too).
  CHECK(backend.launches[kCopyPlanesKernel] == 1);
}

// The weight gradients run on lane 1 beside the input gradients and the records after them (conv_backward),
// the one-to-one head (the tape's branch) on lane 2 beside the one-to-many head and the backbone's backward,
// and the one-to-one loss on lane 1 beside the one-to-many loss, its sums copied to the host on lane 7 while
// the backward is launched: through a backend that runs a side lane's launches only when it joins (or the
// host waits for it), and through one that runs them interleaved with the main lane's, one training pass of
// yolo26n gives the plain backend's loss and gradients bit for bit (nothing on the main lane
// overwrote a dz, workspace, x or scratch that a pending launch read, and the branch's scratch and split-K
// sums are its own: with one pool for both lanes the interleaved pass differs); outside the branch every
// weight- and bias-gradient launch went to lane 1, the loss's kernels to lanes 0 and 1, everything else to
// lanes 0 and 2; some weight gradients stayed pending past their record (fewer joins than forks), and none is
// left pending after the pass.
TEST_CASE("one training pass of yolo26n gives the same gradients with its side lanes delayed or interleaved",
          "[gradient_tape]") {
  using Schedule = test::DelayedLanesBackend::Schedule;
  const Schedule schedule = GENERATE(Schedule::Latest, Schedule::Interleaved);
  auto cpu = make_backend("cpu", test::embedded_context());
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const int size = 64;
  const std::vector<float> image = random_uniform(size_t(3) * size * size, 0.0f, 1.0f, 71);
  const std::vector<std::vector<loss::GtBox>> boxes = {{{0, 4, 6, 40, 50}, {1, 30, 20, 60, 44}}};
  TrainingPass plain(*cpu, model, 1, size, size);
  const double plain_loss = plain.run(image, boxes, loss::LossConfig{}).total;
  test::DelayedLanesBackend delayed(*cpu, schedule);
  TrainingPass lanes(delayed, model, 1, size, size);
  const double lanes_loss = lanes.run(image, boxes, loss::LossConfig{}).total;
  CHECK(delayed.pending() == 0);
  CHECK(lanes_loss == plain_loss);
  CHECK(delayed.side_lane_downloads == 4);  // each head's sums, read after the backward's launches
  const reference::ConvGradients want = plain.tape().conv_gradients(), got = lanes.tape().conv_gradients();
  REQUIRE(got.size() == want.size());
  size_t differing = 0;
  for (const auto& [name, g] : want) {
    const reference::ConvGradient& h = got.at(name);
    differing += (h.weight != g.weight) + (h.bias != g.bias);
  }
  CHECK(differing == 0);
  const auto starts = [](const std::string& kernel, std::initializer_list<const char*> prefixes) {
    for (const char* p : prefixes)
      if (kernel.rfind(p, 0) == 0) return true;
    return false;
  };
  for (const auto& [kernel, lanes_used] : delayed.lanes_of) {
    INFO(kernel);
    if (starts(kernel, {"conv2d_wgrad", "conv2d_bias_grad"}))
      CHECK((lanes_used == std::set<int>{1} || lanes_used == std::set<int>{1, 2}));
    else if (starts(kernel, {"tal_", "box_targets", "ciou_", "box_terms", "cls_terms", "row_sums"}))
      CHECK(lanes_used == std::set<int>{0, 1});
    else
      CHECK((lanes_used == std::set<int>{0} || lanes_used == std::set<int>{0, 2}));
  }
  // The branch's backward on lane 2 (its SiLU backwards all run in input-gradient epilogues: no
  // conv2d_silu_bias_backward there).
  CHECK(std::any_of(delayed.lanes_of.begin(), delayed.lanes_of.end(),
                    [](const auto& kernel_lanes) { return kernel_lanes.second.count(2) > 0; }));
  CHECK(delayed.joins > 0);
  CHECK(delayed.joins < delayed.forks);
}

// A branch runs on its own lane: its ops may only read tensors that need no gradient from outside it, and no
// op after it may read its tensors (either would need an order between the lanes).
TEST_CASE("the gradient tape's branch takes only detached inputs and feeds nothing after it",
          "[gradient_tape]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  const ConvSpec A = silu_conv("A", 3, 4, 3, 10), B = silu_conv("B", 4, 4, 1, 20),
                 C = silu_conv("C", 4, 4, 1, 30);
  GradientTape tape(*cpu);
  const TapeTensor x = tape.input(kBatch, 3, kHeight, kWidth);
  const TapeTensor a = tape.conv(A, x);
  const TapeTensor detached = tape.detach(a);
  tape.begin_branch();
  CHECK_THROWS_AS(tape.begin_branch(), RuntimeError);
  CHECK_THROWS_AS(tape.conv(B, a), RuntimeError);  // its gradient would add to a's from another lane
  const TapeTensor b = tape.conv(B, detached);
  tape.end_branch();
  CHECK_THROWS_AS(tape.end_branch(), RuntimeError);
  CHECK_THROWS_AS(tape.conv(C, b), RuntimeError);  // would read the branch lane's output unordered
  CHECK_NOTHROW(tape.conv(C, a));
}
