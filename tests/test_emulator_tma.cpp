// mbarriers (common/lab_mbarrier.cuh) and TMA bulk tensor copies (common/lab_tma.cuh) on the emulator
// (nvrtc_runtime/cpu/device/lab_emu_mbarrier.hpp, lab_emu_tma.hpp), each checked against what the PTX ISA
// and the driver's tensor map documentation say, with expectations computed here: mbarrier parities over
// several phases with transaction bytes, raw swizzled boxes of loads of rank 1-5 with edges out of the
// tensor, stores clipped at the edges, the emulator's errors (deadlocks, misuse, foreign maps, misalignment,
// expect_tx not matching the box), the host-side description checks, and the tma_copy runner (kernels/memory)
// against its reference. The [gpu] twins run the same kernels on cuda and compare the GPU's bytes with the
// emulator's and with the expectations.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

std::vector<int> mbarrier_phases(Backend& backend, int phases) {
  auto module = backend.compile({"tma.cu", {}, {"mbarrier_phases"}});
  DeviceBuffer out = backend.upload_vector(std::vector<int>(size_t(phases) * 64 * 3, -1));
  void* out_ptr = out.get();
  backend.launch(module->kernel("mbarrier_phases"), {{1, 1, 1}, {64, 1, 1}}, kernel_args(out_ptr, phases));
  backend.synchronize();
  return backend.download_vector<int>(out, size_t(phases) * 64 * 3);
}

void check_phases(const std::vector<int>& seen, int phases) {
  for (int k = 0; k < phases; ++k)
    for (int t = 0; t < 64; ++t) {
      INFO("phase " << k << " thread " << t);
      const int* o = seen.data() + (size_t(k) * 64 + size_t(t)) * 3;
      CHECK(o[0] == 0);  // its own arrival is missing: the phase cannot be complete
      CHECK(o[1] == 1);
      CHECK(o[2] == 0);  // the next phase needs this thread's arrival too
    }
}

// A tensor of distinct nonzero 32-bit values (its element index + 1), with its dims and box.
struct Case {
  std::string name;
  std::vector<uint64_t> dims;
  std::vector<uint32_t> box;
  std::vector<int> coords;
  std::vector<uint32_t> element_strides;  // empty: all 1
  TensorSwizzle swizzle = TensorSwizzle::None;
};

std::vector<Case> load_cases() {
  // The 1-D case last: on the H200 it faults (illegal instruction in the 1-D copy, docs/PERFORMANCE.md), and a
  // fault is sticky, so the other ranks are checked before it.
  return {{"2D 128B swizzle, rows above and columns past the end",
           {40, 37},
           {32, 8},
           {16, -3},
           {},
           TensorSwizzle::B128},
          {"2D 64B swizzle, a box in the middle", {40, 37}, {16, 16}, {4, 9}, {}, TensorSwizzle::B64},
          {"2D 32B swizzle, the last rows", {40, 37}, {8, 16}, {-4, 30}, {}, TensorSwizzle::B32},
          {"2D every second row", {40, 37}, {8, 6}, {8, 31}, {1, 2}},
          {"3D", {8, 5, 4}, {8, 4, 3}, {0, 3, -1}},
          {"4D", {4, 6, 3, 2}, {4, 4, 2, 2}, {0, 3, 2, -1}},
          {"5D", {4, 3, 3, 2, 2}, {4, 2, 2, 2, 2}, {0, 2, -1, 1, 0}},
          {"1D, the box's last 6 elements past the end", {100}, {16}, {90}}};
}

size_t element_count(const std::vector<uint64_t>& dims) {
  size_t n = 1;
  for (uint64_t d : dims) n *= size_t(d);
  return n;
}

// Where byte `offset` of a box lies in shared memory: the PTX ISA's swizzle, 16-byte chunk c of 128-byte line
// l moved to chunk c ^ (l mod (span / 16)).
size_t swizzled(TensorSwizzle swizzle, size_t offset) {
  const size_t span = swizzle == TensorSwizzle::B128  ? 128
                      : swizzle == TensorSwizzle::B64 ? 64
                      : swizzle == TensorSwizzle::B32 ? 32
                                                      : 16;
  const size_t chunk = offset / 16 % 8, line = offset / 128;
  return offset - chunk * 16 + (chunk ^ (line % (span / 16))) * 16;
}

// The box of `c` as it lies in shared memory: element values, 0 outside the tensor.
std::vector<uint8_t> expected_box(const Case& c) {
  const int rank = int(c.dims.size());
  std::vector<size_t> extent(static_cast<size_t>(rank));
  size_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t es = c.element_strides.empty() ? 1 : c.element_strides[size_t(d)];
    extent[size_t(d)] = (c.box[size_t(d)] + es - 1) / es;
    count *= extent[size_t(d)];
  }
  std::vector<uint8_t> box(count * 4);
  for (size_t n = 0; n < count; ++n) {
    size_t rest = n, linear = 0, scale = 1;
    bool inside = true;
    for (int d = 0; d < rank; ++d) {
      const uint32_t es = c.element_strides.empty() ? 1 : c.element_strides[size_t(d)];
      const long long at = c.coords[size_t(d)] + (long long)(rest % extent[size_t(d)]) * es;
      rest /= extent[size_t(d)];
      inside = inside && at >= 0 && at < (long long)c.dims[size_t(d)];
      linear += size_t(at) * scale;
      scale *= size_t(c.dims[size_t(d)]);
    }
    const uint32_t value = inside ? uint32_t(linear + 1) : 0;
    std::memcpy(&box[swizzled(c.swizzle, n * 4)], &value, 4);
  }
  return box;
}

std::vector<uint32_t> tensor_values(const Case& c) {
  std::vector<uint32_t> v(element_count(c.dims));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint32_t(i + 1);
  return v;
}

TensorMapDesc describe(const Case& c, const DeviceBuffer& buffer) {
  TensorMapDesc d = dense_tensor_map(TensorElement::U32, buffer, c.dims, c.box);
  for (size_t i = 0; i < c.element_strides.size(); ++i) d.element_strides[i] = c.element_strides[i];
  d.swizzle = c.swizzle;
  return d;
}

// One tma_load_raw launch: the box's bytes as they lie in shared memory. `announced` bytes of expect_tx
// (default: the box's), `smem_offset` from a 1024-byte boundary, `map` instead of the case's own.
std::vector<uint8_t> load_raw(Backend& backend, const Case& c, int announced = -1, int smem_offset = 0,
                              const TensorMap* map = nullptr) {
  auto module = backend.compile({"tma.cu", {}, {"tma_load_raw"}});
  DeviceBuffer tensor = backend.upload_vector(tensor_values(c));
  int box_bytes = int(expected_box(c).size());
  DeviceBuffer out = backend.upload_vector(std::vector<uint8_t>(size_t(box_bytes), 0xee));
  TensorMap m = map ? *map : backend.tensor_map(describe(c, tensor));
  int rank = int(c.dims.size());
  int k[5] = {};
  for (size_t i = 0; i < c.coords.size(); ++i) k[i] = c.coords[i];
  void* out_ptr = out.get();
  int expect = announced >= 0 ? announced : box_bytes;
  backend.launch(module->kernel("tma_load_raw"), {{1, 1, 1}, {32, 1, 1}, 2048 + size_t(box_bytes)},
                 kernel_args(m, rank, k[0], k[1], k[2], k[3], k[4], out_ptr, expect, smem_offset));
  backend.synchronize();
  return backend.download_vector<uint8_t>(out, size_t(box_bytes));
}

// tma_store_box of the case's box (values: box index + 1000, laid out swizzled) into a tensor of 0xab bytes.
std::vector<uint8_t> store_box(Backend& backend, const Case& c) {
  auto module = backend.compile({"tma.cu", {}, {"tma_store_box"}});
  const size_t box_bytes = expected_box(c).size();
  std::vector<uint8_t> staged(box_bytes);
  for (size_t n = 0; n < box_bytes / 4; ++n) {
    const uint32_t v = uint32_t(n + 1000);
    std::memcpy(&staged[swizzled(c.swizzle, n * 4)], &v, 4);
  }
  DeviceBuffer tensor = backend.upload_vector(std::vector<uint8_t>(element_count(c.dims) * 4, 0xab));
  DeviceBuffer in = backend.upload_vector(staged);
  TensorMap m = backend.tensor_map(describe(c, tensor));
  int rank = int(c.dims.size()), bytes = int(box_bytes);
  int k[5] = {};
  for (size_t i = 0; i < c.coords.size(); ++i) k[i] = c.coords[i];
  const void* in_ptr = in.get();
  backend.launch(module->kernel("tma_store_box"), {{1, 1, 1}, {32, 1, 1}, 1024 + box_bytes},
                 kernel_args(m, rank, k[0], k[1], k[2], k[3], k[4], in_ptr, bytes));
  backend.synchronize();
  return backend.download_vector<uint8_t>(tensor, element_count(c.dims) * 4);
}

// The tensor after store_box: box element n (value n + 1000) wherever it lands inside, 0xab elsewhere.
std::vector<uint8_t> expected_store(const Case& c) {
  std::vector<uint8_t> tensor(element_count(c.dims) * 4, 0xab);
  const int rank = int(c.dims.size());
  size_t count = 1;
  for (uint32_t b : c.box) count *= b;
  for (size_t n = 0; n < count; ++n) {
    size_t rest = n, linear = 0, scale = 1;
    bool inside = true;
    for (int d = 0; d < rank; ++d) {
      const long long at = c.coords[size_t(d)] + (long long)(rest % c.box[size_t(d)]);
      rest /= c.box[size_t(d)];
      inside = inside && at >= 0 && at < (long long)c.dims[size_t(d)];
      linear += size_t(at) * scale;
      scale *= size_t(c.dims[size_t(d)]);
    }
    const uint32_t v = uint32_t(n + 1000);
    if (inside) std::memcpy(&tensor[linear * 4], &v, 4);
  }
  return tensor;
}

std::vector<Case> store_cases() {
  return {{"2D, past the last row and column", {40, 37}, {32, 8}, {16, 33}},
          {"2D 128B swizzle, above the first row", {40, 37}, {32, 8}, {0, -2}, {}, TensorSwizzle::B128},
          {"3D, before the first column", {8, 5, 4}, {8, 4, 2}, {-4, 1, 2}},
          {"5D", {4, 3, 3, 2, 2}, {4, 2, 2, 2, 2}, {0, 2, -1, 1, 0}},
          {"1D, the box's last 6 elements past the end", {100}, {16}, {90}}};
}

std::string launch_error(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return {};
}

std::string misuse_error(Backend& backend, int mode) {
  auto module = backend.compile({"tma.cu", {}, {"mbarrier_misuse"}});
  return launch_error([&] {
    backend.launch(module->kernel("mbarrier_misuse"), {{1, 1, 1}, {32, 1, 1}}, kernel_args(mode));
  });
}

// Every tma_copy variant at a few shapes; returns each output's values (for the [gpu] twin's comparison).
std::vector<std::vector<float>> run_tma_copy(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get("tma_copy");
  std::vector<std::vector<float>> outputs;
  const std::vector<Params> shapes = {{},
                                      {{"N", "1"}, {"H", "7"}, {"W", "9"}, {"C", "36"}, {"STAGES", "2"}},
                                      {{"N", "3"}, {"H", "5"}, {"W", "11"}, {"C", "100"}, {"STAGES", "4"}}};
  for (const KernelVariant& v : r.variants())
    for (const Params& given : shapes) {
      auto inst = r.instantiate(*backend, v.name, resolve_params(r, given), 3);
      inst->launch();
      for (const OutputCheck& c : inst->check(std::nullopt)) {
        INFO(backend_name << " " << v.name << " C=" << resolve_params(r, given).at("C") << ": max_abs "
                          << c.metrics.max_abs << " at " << c.metrics.worst_index);
        CHECK(c.metrics.non_finite == 0);
        CHECK(c.pass);
        outputs.push_back(c.out);
      }
    }
  return outputs;
}

}  // namespace

TEST_CASE("emulator: mbarrier phases alternate parity, wait for arrivals and transaction bytes",
          "[emulator][tma]") {
  auto backend = test::emulator_backend();
  check_phases(mbarrier_phases(*backend, 5), 5);
}

TEST_CASE("emulator: mbarrier deadlocks and misuse end the launch with the waiters and the line",
          "[emulator][tma]") {
  // First, on fresh workers: shared memory (the emulator's thread_local) keeps what an earlier block left.
  auto backend = test::emulator_backend();
  std::string message = misuse_error(*backend, 2);
  CHECK_THAT(message, Contains("tma.cu:58: mbarrier used before lab_mbarrier_init"));
  message = misuse_error(*backend, 0);
  INFO(message);
  CHECK_THAT(message,
             Contains("barrier deadlock: every thread of the block waits and no mbarrier or named barrier "
                      "it waits on can change: threads 0-31 wait on an mbarrier ("));
  CHECK_THAT(message, Contains("tma.cu:61) in phase 0 with 1 of 2 arrivals and 0 transaction bytes pending"));
  message = misuse_error(*backend, 1);
  CHECK_THAT(message,
             Contains("tma.cu:61) in phase 0 with 0 of 1 arrivals and 32 transaction bytes pending"));
  message = misuse_error(*backend, 3);
  CHECK_THAT(message,
             Contains("tma.cu:56: mbarrier received 32 transaction bytes more than expect_tx announced"));
}

TEST_CASE("emulator: TMA loads of rank 1-5 fill the box, zeros outside the tensor, swizzled as the map says",
          "[emulator][tma]") {
  auto backend = test::emulator_backend();
  for (const Case& c : load_cases()) {
    INFO(c.name);
    CHECK(load_raw(*backend, c) == expected_box(c));
  }
}

TEST_CASE("emulator: TMA stores write the box's elements inside the tensor and nothing outside",
          "[emulator][tma]") {
  auto backend = test::emulator_backend();
  for (const Case& c : store_cases()) {
    INFO(c.name);
    CHECK(store_box(*backend, c) == expected_store(c));
  }
}

TEST_CASE("emulator: a TMA copy with a foreign map, a misaligned box or a wrong expect_tx fails at its line",
          "[emulator][tma]") {
  auto backend = test::emulator_backend();
  const Case c = load_cases()[0];
  const TensorMap foreign{};  // what a cuda map looks like to the emulator: no emulator layout
  std::string message = launch_error([&] { load_raw(*backend, c, -1, 0, &foreign); });
  CHECK_THAT(message, Contains("tma.cu:67: the tensor map was not made by the cpu backend"));
  message = launch_error([&] { load_raw(*backend, c, -1, 128); });
  CHECK_THAT(message, Contains("TMA shared-memory address is not 1024-byte aligned"));
  message = launch_error([&] { load_raw(*backend, c, 512); });
  CHECK_THAT(message, Contains("mbarrier received 512 transaction bytes more than expect_tx announced"));
  Case wrong_rank = c;
  wrong_rank.coords.push_back(0);
  wrong_rank.dims.push_back(1);
  wrong_rank.box.push_back(1);
  const DeviceBuffer tensor = backend->upload_vector(tensor_values(c));
  const TensorMap two_d = backend->tensor_map(describe(c, tensor));
  message = launch_error([&] { load_raw(*backend, wrong_rank, -1, 0, &two_d); });
  CHECK_THAT(message, Contains("a 3D copy with a tensor map of rank 2"));
}

TEST_CASE("tensor map descriptions are checked field by field with one-line errors", "[tma]") {
  auto backend = test::emulator_backend();
  const DeviceBuffer buffer = backend->alloc(40 * 37 * 4);
  const TensorMapDesc good = dense_tensor_map(TensorElement::F32, buffer, {40, 37}, {32, 8});
  CHECK_NOTHROW(backend->tensor_map(good));
  auto error = [&](const std::function<void(TensorMapDesc&)>& change) {
    TensorMapDesc d = good;
    change(d);
    try {
      backend->tensor_map(d);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error([](TensorMapDesc& d) { d.rank = 6; }) == "tensor map: rank = 6 is outside 1..5");
  CHECK(error([](TensorMapDesc& d) { d.box[1] = 300; }) == "tensor map: box[1] = 300 is outside 1..256");
  CHECK(error([](TensorMapDesc& d) { d.box[0] = 6; }) ==
        "tensor map: box[0] = 6 elements is not a multiple of 16 bytes");
  CHECK(error([](TensorMapDesc& d) { d.strides[0] = 164; }) ==
        "tensor map: strides[0] = 164 is not a multiple of 16 bytes below 2^40");
  CHECK(error([](TensorMapDesc& d) { d.dims[1] = 38; }) ==
        "tensor map: dims reach byte 6080 of a buffer of 5920 bytes");
  CHECK(error([](TensorMapDesc& d) { d.offset_bytes = 8; }) ==
        "tensor map: offset_bytes = 8 leaves the global address not 16-byte aligned");
  CHECK(error([](TensorMapDesc& d) { d.swizzle = TensorSwizzle::B64; }) ==
        "tensor map: swizzle rows are 64 bytes, shorter than the 128 bytes of a box row");
  CHECK(error([](TensorMapDesc& d) { d.element_strides[0] = 9; }) ==
        "tensor map: element_strides[0] = 9 is outside 1..8");
  CHECK(error([](TensorMapDesc& d) { d.buffer = nullptr; }) ==
        "tensor map: buffer is not set (a tensor map needs the tensor's DeviceBuffer)");
  CHECK(error([](TensorMapDesc& d) { d.im2col = true; }) == "tensor map: rank = 2 is outside 3..5");
  CHECK(error([](TensorMapDesc& d) {
          d = dense_tensor_map(TensorElement::F32, *d.buffer, {8, 5, 37}, {});
          d.im2col = true;
          d.pixels = {{-1, 0, 0}, {-1, 0, 0}, 6, 32};
        }) == "tensor map: pixels.channels_per_pixel = 6 elements is not a multiple of 16 bytes");
  CHECK(error([](TensorMapDesc& d) {
          d = dense_tensor_map(TensorElement::F32, *d.buffer, {8, 5, 4, 9}, {});
          d.im2col = true;
          d.pixels = {{-1, -200, 0}, {-1, -1, 0}, 8, 32};
        }) == "tensor map: pixels.lower[1] = -200 is outside -128..127");
  CHECK(error([](TensorMapDesc& d) {
          d = dense_tensor_map(TensorElement::F32, *d.buffer, {8, 5, 4, 9}, {});
          d.im2col = true;
          d.pixels = {{-1, -1, 0}, {-1, -1, 0}, 8, 32};
          d.element_strides = {1, 2, 2, 2, 1};
        }) ==
        "tensor map: element_strides[3] must be 1 in an im2col map (traversal strides apply to the spatial "
        "dimensions)");
}

TEST_CASE(
    "lab_mbarrier.cuh and lab_tma.cuh compile with NVRTC for sm_90 to mbarrier and TMA instructions (no GPU "
    "needed)",
    "[tma]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileResult r = compile_with_nvrtc(
      *ctx.tree, *ctx.cache,
      {"tma.cu", {}, {"mbarrier_phases", "mbarrier_misuse", "tma_load_raw", "tma_store_box"}}, "sm_90");
  for (const char* instruction :
       {"mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64", "mbarrier.expect_tx.relaxed.cta",
        "mbarrier.complete_tx.relaxed.cta", "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64", "fence.mbarrier_init.release.cluster",
        "fence.proxy.async.shared::cta",
        "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group", "cp.async.bulk.commit_group",
        "cp.async.bulk.wait_group.read 0"})
    CHECK_THAT(r.ptx, Contains(instruction));
}

TEST_CASE("tma_copy: every variant copies (or im2col-gathers) exactly on the cpu backend", "[tma]") {
  run_tma_copy("cpu");
}

TEST_CASE("mbarrier phases and TMA boxes on the GPU match the expectations and the emulator", "[tma][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto gpu = make_backend("cuda", test::emulator_kernels_context());
  auto cpu = test::emulator_backend();
  check_phases(mbarrier_phases(*gpu, 5), 5);
  for (const Case& c : load_cases()) {
    INFO("load " << c.name);
    const std::vector<uint8_t> bytes = load_raw(*gpu, c);
    CHECK(bytes == expected_box(c));
    CHECK(bytes == load_raw(*cpu, c));
  }
  for (const Case& c : store_cases()) {
    INFO("store " << c.name);
    const std::vector<uint8_t> bytes = store_box(*gpu, c);
    CHECK(bytes == expected_store(c));
    CHECK(bytes == store_box(*cpu, c));
  }
}

TEST_CASE("tma_copy on the GPU matches the reference and the emulator's bytes", "[tma][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const std::vector<std::vector<float>> gpu = run_tma_copy("cuda"), cpu = run_tma_copy("cpu");
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    INFO("output " << i);
    REQUIRE(gpu[i].size() == cpu[i].size());
    CHECK(std::memcmp(gpu[i].data(), cpu[i].data(), gpu[i].size() * sizeof(float)) == 0);
  }
}
