// The launch profile (Backend::start_launch_profile): every launch between start and stop comes back as one
// sample with its kernel, grid size and a time that covers the kernel's run, and so does each copy and fill
// (named, no blocks); launches outside the profile and graph replays captured before it are not sampled;
// captures during it run their work on each replay (timed).
// Both backends (the cuda half is a [gpu] twin), both timings (as launched, alone); `lab bench train-step
// --kernels` / `--kernels-alone` sum the samples per kernel.
#include <catch2/catch.hpp>

#include "kernels/compare.hpp"
#include "tests/test_emulator_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

void launch_tree_sum(Backend& backend, const Module& module, const DeviceBuffer& in, const DeviceBuffer& out,
                     int count, unsigned blocks) {
  void* in_ptr = in.get();
  void* out_ptr = out.get();
  backend.launch(module.kernel("tree_sum<256>"), {{blocks, 1, 1}, {256, 1, 1}},
                 kernel_args(in_ptr, out_ptr, count));
}

void check_launch_profile(const std::string& backend_name, LaunchProfileTiming timing) {
  auto backend = make_backend(backend_name, test::emulator_kernels_context());
  auto module = backend->compile({"reductions.cu", {}, {"tree_sum<256>"}});
  const int n = 256 * 64;
  DeviceBuffer in = backend->upload_vector(random_uniform(n, -1.0f, 1.0f, 3));
  DeviceBuffer out = test::poisoned_floats(*backend, 64);

  launch_tree_sum(*backend, *module, in, out, n, 64);  // before the profile: not sampled
  std::unique_ptr<LaunchGraph> before = backend->capture([&] { launch_tree_sum(*backend, *module, in, out, n, 64); });
  before->replay();
  backend->synchronize();

  backend->start_launch_profile(timing);
  before->replay();  // cuda: a graph, untimed; cpu: its work runs again and is sampled
  launch_tree_sum(*backend, *module, in, out, n, 64);
  backend->fill_bytes(out.get(), 0, 4);
  std::unique_ptr<LaunchGraph> during = backend->capture([&] { launch_tree_sum(*backend, *module, in, out, 256, 1); });
  during->replay();
  during->replay();
  float first = 0;
  backend->download(&first, out.get(), sizeof(float));
  const std::vector<LaunchSample> samples = backend->stop_launch_profile();
  launch_tree_sum(*backend, *module, in, out, n, 64);  // after: not sampled
  backend->synchronize();

  const size_t g = backend->can_capture_graphs() ? 0 : 1;  // cpu: the earlier capture's replay is sampled
  REQUIRE(samples.size() == g + 5);
  const std::vector<std::pair<std::string, unsigned long long>> expected = {
      {"tree_sum<256>", 64}, {kFill, 0}, {"tree_sum<256>", 1}, {"tree_sum<256>", 1}, {kCopyToHost, 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("sample " << g + i);
    CHECK(samples[g + i].kernel == expected[i].first);
    CHECK(samples[g + i].blocks == expected[i].second);
  }
  for (const LaunchSample& s : samples)
    if (s.blocks) CHECK(s.ms > 0);  // a kernel takes time; a 4-byte copy may read 0 on the wall clock
  CHECK(backend->stop_launch_profile().empty());  // stopping again: nothing left over
}

}  // namespace

TEST_CASE("the cpu backend's launch profile samples each launch between start and stop", "[runtime][profile]") {
  check_launch_profile("cpu", LaunchProfileTiming::AsLaunched);
  check_launch_profile("cpu", LaunchProfileTiming::Alone);
}

TEST_CASE("the cuda backend's launch profile samples each launch between start and stop",
          "[runtime][profile][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_launch_profile("cuda", LaunchProfileTiming::AsLaunched);
  check_launch_profile("cuda", LaunchProfileTiming::Alone);
}
