// Copies to the host on lanes (Backend::download_async, wait_lane): on cuda a copy's bytes are only there
// once the host waited for its lane, or for the main lane after that lane joined it. The cpu backend models
// that (HostCopyLanes): until the wait the destination is poison (NaN), so a missing wait fails here and in
// every cpu test of the code that copies, as it only might on the GPU. The lane checks match cuda's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "nvrtc_runtime/cpu/host_copy_lanes.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

// Four doubles on the device, 1.5 .. 4.5.
DeviceBuffer four_values(Backend& backend) {
  DeviceBuffer buffer = backend.alloc(4 * sizeof(double));
  const std::vector<double> values{1.5, 2.5, 3.5, 4.5};
  backend.upload(buffer.get(), values.data(), 4 * sizeof(double));
  return buffer;
}

bool holds_values(const double* host) {
  return host[0] == 1.5 && host[1] == 2.5 && host[3] == 4.5;
}

// The waits that must deliver, the same on both backends.
void check_delivered_after_waits(Backend& backend) {
  const DeviceBuffer device = four_values(backend);
  HostBuffer host = backend.alloc_host(3 * 4 * sizeof(double));
  double* on_side = host.as<double>();
  double* joined = on_side + 4;
  double* on_main = on_side + 8;
  backend.fork_lane(7);
  backend.use_lane(7);
  backend.download_async(on_side, device.get(), 4 * sizeof(double));
  backend.use_lane(0);
  backend.wait_lane(7);
  CHECK(holds_values(on_side));
  backend.join_lane(7);

  backend.fork_lane(3);
  backend.use_lane(3);
  backend.download_async(joined, device.get(), 4 * sizeof(double));
  backend.join_lane(3);  // the main lane current again
  backend.download_async(on_main, device.get(), 4 * sizeof(double));
  backend.synchronize();
  CHECK(holds_values(joined));
  CHECK(holds_values(on_main));
}

}  // namespace

TEST_CASE("cpu backend: a copy to the host is poison until the host waits for its lane",
          "[runtime][host_copy_lanes]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const DeviceBuffer device = four_values(*backend);
  HostBuffer host = backend->alloc_host(4 * sizeof(double));
  double* values = host.as<double>();

  backend->fork_lane(7);
  backend->use_lane(7);
  backend->download_async(values, device.get(), 4 * sizeof(double));
  backend->use_lane(0);
  CHECK(std::isnan(values[0]));
  backend->synchronize();  // the main lane: lane 7 has not joined it
  CHECK(std::isnan(values[0]));
  backend->wait_lane(7);
  CHECK(holds_values(values));

  // Joined: waiting for the main lane delivers it, a synchronous download among those waits.
  backend->use_lane(7);
  backend->download_async(values, device.get(), 4 * sizeof(double));
  backend->join_lane(7);
  CHECK(std::isnan(values[0]));
  double one = 0;
  backend->download(&one, device.get(), sizeof(double));
  CHECK(holds_values(values));
  CHECK(one == 1.5);

  check_delivered_after_waits(*backend);
}

TEST_CASE("cpu backend: lanes are checked as on cuda", "[runtime][host_copy_lanes]") {
  auto backend = make_backend("cpu", test::embedded_context());
  CHECK_THROWS_WITH(backend->use_lane(5), "lane 5 was not forked");
  CHECK_THROWS_WITH(backend->wait_lane(9), "lane 9 was never forked");
  CHECK_THROWS_WITH(backend->fork_lane(0), "lane 0 cannot be forked");
}

TEST_CASE("HostCopyLanes: released host memory takes no pending copy", "[runtime][host_copy_lanes]") {
  // Dropped at the release (on cuda, freeing page-locked memory waits for the device), so no wait writes
  // into freed memory; a copy into memory that stays is still pending.
  std::vector<double> device(4, 1.5);
  cpu::HostCopyLanes lanes;
  lanes.fork(2);
  lanes.use(2);
  HostBuffer kept = cpu::HostCopyLanes::alloc_host(4 * sizeof(double));
  {
    HostBuffer released = cpu::HostCopyLanes::alloc_host(4 * sizeof(double));
    lanes.download_async(released.get(), device.data(), 4 * sizeof(double));
    lanes.download_async(kept.get(), device.data(), 4 * sizeof(double));
    CHECK(lanes.pending() == 2);
  }
  CHECK(lanes.pending() == 1);
  lanes.wait(2);
  CHECK(lanes.pending() == 0);
  CHECK(kept.as<double>()[3] == 1.5);
}

TEST_CASE("cuda backend: copies to the host are there after the waits", "[runtime][host_copy_lanes][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_delivered_after_waits(*backend);
}
