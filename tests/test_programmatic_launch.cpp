// Programmatic Dependent Launch (LaunchConfig::programmatic_dependent, common/lab_grid_dependency.cuh): a
// producer / dependent chain, forked across lanes and joined, captured as one graph and replayed many times,
// the dependent seeing every write of its producers (cpu: launches one after another; [gpu]: the attribute
// through cudaLaunchKernelEx, programmatic edges in the graph); the NVRTC build of the helpers
// (griddepcontrol on sm_90, nothing below) and of every NHWC network kernel (one wait per entry an op
// launches with the flag); and the NHWC ops, and on the GPU the whole NHWC network at batch 1 (640, yolo26n,
// fp16 and bf16), giving the same bytes with the flag on and off (lab --no-pdl).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/psa_half_op.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_stem_nhwc_op.hpp"
#include "kernels/nn/nhwc_layers_op.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "pipeline/executor/activation_layout.hpp"
#include "pipeline/network.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

size_t occurrences(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) ++count;
  return count;
}

// `rounds` rounds, each: two lanes; lane 1 produces value 1000 r + 500 into the second buffer, lane 0
// produces 1000 r into the first and a dependent right behind it (a programmatic edge from its producer)
// copies it into out's row 2 r; after the join a dependent (edges from both lanes' last kernels) copies the
// second buffer into row 2 r + 1. Captured once, replayed `replays` times (out reset before each); requires
// every value of every replay.
void run_chain(Backend& backend, int n, int rounds, int replays) {
  auto module =
      backend.compile({"grid_dependency.cu", {}, {"grid_dependency_produce", "grid_dependency_consume"}});
  const Kernel produce = module->kernel("grid_dependency_produce");
  const Kernel consume = module->kernel("grid_dependency_consume");
  DeviceBuffer first = backend.alloc(sizeof(int) * size_t(n)),
               second = backend.alloc(sizeof(int) * size_t(n));
  DeviceBuffer busy = backend.alloc(sizeof(unsigned) * 2 * size_t(n));
  const size_t out_ints = size_t(2 * rounds) * size_t(n);
  DeviceBuffer out = backend.alloc(sizeof(int) * out_ints);
  const LaunchConfig plain{{unsigned((n + 127) / 128), 1, 1}, {128, 1, 1}, 0};
  LaunchConfig dependent = plain;
  dependent.programmatic_dependent = true;
  int* a = first.as<int>();
  int* b = second.as<int>();
  unsigned* busy_a = busy.as<unsigned>();
  unsigned* busy_b = busy_a + n;
  auto graph = backend.capture([&] {
    for (int r = 0; r < rounds; ++r) {
      backend.fork_lanes(2);
      backend.use_lane(1);
      int value_b = 1000 * r + 500, value_a = 1000 * r;
      backend.launch(produce, plain, kernel_args(b, busy_b, n, value_b));
      backend.use_lane(0);
      backend.launch(produce, plain, kernel_args(a, busy_a, n, value_a));
      int* row = out.as<int>() + size_t(2 * r) * size_t(n);
      const int* from_a = a;
      backend.launch(consume, dependent, kernel_args(from_a, n, row));
      backend.join_lanes();
      const int* from_b = b;
      int* next_row = row + n;
      backend.launch(consume, dependent, kernel_args(from_b, n, next_row));
    }
  });
  for (int replay = 0; replay < replays; ++replay) {
    backend.fill_bytes(out.get(), 0xff, sizeof(int) * out_ints);
    graph->replay();
    backend.synchronize();
    const std::vector<int> seen = backend.download_vector<int>(out, out_ints);
    size_t wrong = 0;
    for (int r = 0; r < rounds; ++r)
      for (int half = 0; half < 2; ++half)
        for (int i = 0; i < n; ++i)
          wrong += seen[size_t(2 * r + half) * size_t(n) + size_t(i)] != 1000 * r + 500 * half + i;
    INFO(backend.name() << " replay " << replay);
    REQUIRE(wrong == 0);
  }
}

RuntimeContext context_with_pdl(RuntimeContext context, bool on) {
  context.options.programmatic_launch = on;
  return context;
}

std::vector<float> random_floats(size_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

// A chain of every NHWC op (fp16): stem 3->16 stride 2, 3x3 conv 16->32 with a residual-free slice write,
// depthwise with residual, max pool, upsample, copy, 1x1 conv to the PSA's qkv, the PSA attention, and the
// detect head's float planes; launched back to back (a captured graph where the backend can). Returns every
// intermediate's bytes.
std::vector<uint8_t> nhwc_chain_bytes(Backend& backend) {
  const ActivationType type = ActivationType::f16;
  const int batch = 1, h = 16, w = 16, ho = 8, wo = 8;
  DeviceBuffer image = backend.upload_vector(random_floats(size_t(batch) * 3 * h * w, 1, 1.0f));
  const Conv2dShape stem_shape{3, 16, 3, 2};
  Conv2dStemNhwcOp stem(backend, stem_shape, type, random_floats(16 * 27, 2, 0.5f),
                        random_floats(16, 3, 0.1f));
  const Conv2dShape conv_shape{16, 32, 3, 1};
  Conv2dNhwcOp conv(backend, conv_shape, type, random_floats(32 * 16 * 9, 4, 0.2f),
                    random_floats(32, 5, 0.1f));
  const Conv2dShape qkv_shape{32, 64, 1, 1, 1, false};
  Conv2dNhwcOp qkv(backend, qkv_shape, type, random_floats(64 * 32, 6, 0.3f), random_floats(64, 7, 0.1f));
  NhwcLayerOps layers(backend, type);
  NhwcDepthwise depthwise(layers, 32, random_floats(32 * 9, 8, 0.3f), random_floats(32, 9, 0.1f), true);
  PsaDims dims;
  dims.batch = batch, dims.num_heads = 1, dims.key_dim = 16, dims.n = ho * wo;
  PsaHalfOp psa(backend, kPsaHalfNetworkVariant, HalfType::f16, dims);

  const size_t pixels = size_t(batch) * ho * wo, big = size_t(batch) * h * w;
  auto tensor = [&](size_t count) {
    DeviceBuffer t = backend.alloc(2 * count);
    backend.fill_bytes(t.get(), 0, 2 * count);
    return t;
  };
  DeviceBuffer s0 = tensor(pixels * 16), s1 = tensor(pixels * 48), s2 = tensor(pixels * 32),
               s3 = tensor(pixels * 32), up = tensor(big * 32), cp = tensor(pixels * 32),
               q = tensor(pixels * 64), merged = tensor(pixels * 32), v_out = tensor(pixels * 32);
  DeviceBuffer lse = backend.alloc(sizeof(float) * pixels), planes = backend.alloc(sizeof(float) * 32 * 80);
  backend.fill_bytes(lse.get(), 0, sizeof(float) * pixels);
  backend.fill_bytes(planes.get(), 0, sizeof(float) * 32 * 80);
  auto view = [](DeviceBuffer& t, int pitch, int offset = 0) {
    return NhwcView{t.as<uint16_t>() + offset, pitch};
  };
  auto forward = [&] {
    stem.run(batch, h, w, image.as<const float>(), view(s0, 16));
    conv.run(batch, ho, wo, view(s0, 16), view(s1, 48, 16));  // channels [16, 48) of a 48-channel tensor
    depthwise.run(batch, ho, wo, view(s1, 48, 16), view(s2, 32), view(s1, 48, 16));
    layers.maxpool(batch, ho, wo, 32, 5, view(s2, 32), view(s3, 32));
    layers.upsample2x(batch, ho, wo, 32, view(s3, 32), view(up, 32));
    layers.copy(int64_t(pixels), 32, view(s3, 32), view(cp, 32));
    qkv.run(batch, ho, wo, view(cp, 32), view(q, 64));
    psa.forward_nhwc(q.as<uint16_t>(), 64, merged.as<uint16_t>(), 32, v_out.as<uint16_t>(), 32,
                     lse.as<float>());
    layers.to_planes(batch, int(pixels), 32, view(merged, 32), planes.as<float>(), 80, 16);
  };
  if (backend.can_capture_graphs()) {
    auto graph = backend.capture(forward);
    graph->replay();
  } else {
    forward();
  }
  backend.synchronize();
  std::vector<uint8_t> bytes;
  for (const DeviceBuffer* t : {&s0, &s1, &s2, &s3, &up, &cp, &q, &merged, &v_out, &lse, &planes}) {
    const std::vector<uint8_t> part = backend.download_vector<uint8_t>(*t, t->bytes());
    bytes.insert(bytes.end(), part.begin(), part.end());
  }
  return bytes;
}

// Every named tensor and the detections of one forward of the NHWC network, as bytes.
std::vector<uint8_t> network_bytes(Network& network, const std::vector<float>& input, int size) {
  network.forward(input.data(), 1, size, size);
  std::vector<uint8_t> bytes;
  auto append = [&bytes](const std::vector<float>& values) {
    const size_t at = bytes.size();
    bytes.resize(at + values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(bytes.data() + at, values.data(), values.size() * sizeof(float));
  };
  for (const std::string& name : network.tensor_names()) append(network.tensor(name).values);
  append(network.detections());
  return bytes;
}

}  // namespace

TEST_CASE("programmatic launch: the option and the capability", "[programmatic_launch]") {
  CHECK(make_backend("cpu", context_with_pdl(test::embedded_context(), true))->programmatic_launch());
  CHECK_FALSE(make_backend("cpu", context_with_pdl(test::embedded_context(), false))->programmatic_launch());
  CHECK(RuntimeOptions{}.programmatic_launch);  // on unless lab --no-pdl
}

TEST_CASE("programmatic launch: a dependent chain across lanes sees its producers' writes on cpu",
          "[programmatic_launch]") {
  auto backend = make_backend("cpu", context_with_pdl(test::emulator_kernels_context(), true));
  run_chain(*backend, 300, 3, 2);
}

TEST_CASE(
    "programmatic launch: the helpers compile with NVRTC to griddepcontrol on sm_90, nothing below "
    "(no GPU needed)",
    "[programmatic_launch]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileRequest request{
      "grid_dependency.cu", {}, {"grid_dependency_produce", "grid_dependency_consume"}};
  const CompileResult hopper = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_90");
  CHECK(occurrences(hopper.ptx, "griddepcontrol.wait;") == 1);
  CHECK(occurrences(hopper.ptx, "griddepcontrol.launch_dependents;") == 1);
  const CompileResult ampere = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_80");
  CHECK(occurrences(ampere.ptx, "griddepcontrol") == 0);
}

TEST_CASE(
    "programmatic launch: every NHWC network kernel waits for its predecessor and triggers its "
    "dependents (NVRTC, no GPU needed)",
    "[programmatic_launch]") {
  const RuntimeContext ctx = test::embedded_context();
  struct Expect {
    const char* what;
    CompileRequest request;
    size_t waiting;  // entries launched with the flag: each waits once and triggers once
  };
  const Expect modules[] = {
      {"conv2d_nhwc 3x3 (and its split-K)", conv2d_nhwc_compile_request(ActivationType::f16, {16, 32, 3, 1}),
       3},
      {"conv2d_nhwc 1x1", conv2d_nhwc_compile_request(ActivationType::bf16, {32, 64, 1, 1}), 2},
      {"conv2d_stem_nhwc", conv2d_stem_nhwc_compile_request(ActivationType::f16, {3, 16, 3, 2}), 1},
      {"nhwc_layers", nhwc_layers_compile_request(ActivationType::f16), 6},
      // psa_attention_half (NCHW, launched plainly) and psa_attention_half_nhwc share the module; so do
      // their _w16 versions.
      {"psa_attention_half*", psa_half_compile_request("mma", HalfType::f16, 16), 1},
      {"psa_attention_half*_w16", psa_half_compile_request("mma_w16", HalfType::f16, 16), 1},
      {"psa_attention_half_nhwc_staged", psa_half_compile_request("mma_staged", HalfType::f16, 16), 1},
  };
  for (const Expect& m : modules) {
    INFO(m.what);
    const CompileResult r = compile_with_nvrtc(*ctx.tree, *ctx.cache, m.request, "sm_90");
    CHECK(occurrences(r.ptx, "griddepcontrol.wait;") == m.waiting);
    CHECK(occurrences(r.ptx, "griddepcontrol.launch_dependents;") == m.waiting);
  }
}

TEST_CASE("programmatic launch: the NHWC ops give the same bytes with and without it on cpu",
          "[programmatic_launch]") {
  auto on = make_backend("cpu", context_with_pdl(test::embedded_context(), true));
  auto off = make_backend("cpu", context_with_pdl(test::embedded_context(), false));
  const std::vector<uint8_t> with = nhwc_chain_bytes(*on);
  CHECK(with == nhwc_chain_bytes(*off));
  CHECK(std::any_of(with.begin(), with.end(), [](uint8_t b) { return b != 0; }));
}

TEST_CASE("programmatic launch: a dependent chain in a captured graph sees its producers' writes on the GPU",
          "[programmatic_launch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", context_with_pdl(test::emulator_kernels_context(), true));
  REQUIRE(backend->programmatic_launch());  // the H200 is sm_90
  run_chain(*backend, 1 << 16, 16, 200);
}

TEST_CASE("programmatic launch: the NHWC ops give the same bytes with and without it in a graph on the GPU",
          "[programmatic_launch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto on = make_backend("cuda", context_with_pdl(test::embedded_context(), true));
  auto off = make_backend("cuda", context_with_pdl(test::embedded_context(), false));
  REQUIRE(on->programmatic_launch());
  REQUIRE_FALSE(off->programmatic_launch());
  const std::vector<uint8_t> without = nhwc_chain_bytes(*off);
  for (int run = 0; run < 20; ++run) {
    INFO("run " << run);
    REQUIRE(nhwc_chain_bytes(*on) == without);
  }
}

TEST_CASE(
    "programmatic launch: the NHWC network gives the same bytes with and without it at batch 1 on the GPU",
    "[programmatic_launch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  auto on = make_backend("cuda", context_with_pdl(test::embedded_context(), true));
  auto off = make_backend("cuda", context_with_pdl(test::embedded_context(), false));
  const std::vector<float> bus = test::bus640_input();
  for (Precision precision : {Precision::Fp16, Precision::Bf16}) {
    CAPTURE(precision_name(precision));
    auto with = make_kernel_network(*model, *on, precision, LayoutChoice::Nhwc);
    auto without = make_kernel_network(*model, *off, precision, LayoutChoice::Nhwc);
    REQUIRE(with->activation_layout() == "nhwc");
    const std::vector<uint8_t> expected = network_bytes(*without, bus, 640);
    for (int run = 0; run < 10; ++run) {  // graph replays: a missing wait shows as a difference in some run
      INFO("run " << run);
      REQUIRE(network_bytes(*with, bus, 640) == expected);
    }
  }
}
