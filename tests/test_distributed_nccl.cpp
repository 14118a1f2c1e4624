// NCCL through the communicator layer: the one-line error where the library is missing, the toolkit's library
// found with every function the layer uses, the factory's refusals, and ([gpu][multi_gpu]) an NCCL all-reduce
// on two GPUs against a float64 sum, skipped where fewer than two GPUs exist; ([gpu]) one rank on one GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/make_communicators.hpp"
#include "pipeline/distributed/nccl_communicator.hpp"
#include "pipeline/distributed/nccl_library.hpp"
#include "pipeline/distributed/rank_threads.hpp"
#include "tests/error_message.hpp"
#include "tests/test_helpers.hpp"

using lab::test::error_message;

namespace {

// Sets LAB_NCCL_LIBRARY for the scope, restoring what was there.
struct NcclLibraryOverride {
  explicit NcclLibraryOverride(const std::string& path) {
    if (const char* old = std::getenv("LAB_NCCL_LIBRARY")) previous = old, had = true;
    setenv("LAB_NCCL_LIBRARY", path.c_str(), 1);
  }
  ~NcclLibraryOverride() {
    if (had)
      setenv("LAB_NCCL_LIBRARY", previous.c_str(), 1);
    else
      unsetenv("LAB_NCCL_LIBRARY");
  }
  std::string previous;
  bool had = false;
};

// CUDA ranks on devices 0 .. count-1 and their NCCL communicators, made on this thread.
struct GpuRanks {
  explicit GpuRanks(int count) {
    for (int device = 0; device < count; ++device) {
      lab::RuntimeContext context = lab::test::embedded_context();
      context.options.device = device;
      backends.push_back(lab::make_backend("cuda", context));
      raw.push_back(backends.back().get());
    }
    communicators = lab::make_communicators(raw, {});
  }
  std::vector<lab::Communicator*> pointers() const {
    std::vector<lab::Communicator*> out;
    for (const auto& c : communicators) out.push_back(c.get());
    return out;
  }
  std::vector<std::unique_ptr<lab::Backend>> backends;
  std::vector<lab::Backend*> raw;
  std::vector<std::unique_ptr<lab::Communicator>> communicators;
};

std::string toolkit_nccl() {
  return "/usr/local/cuda/lib64/libnccl.so.2";
}

}  // namespace

TEST_CASE("NCCL missing: one line naming the library and LAB_NCCL_LIBRARY", "[distributed]") {
  NcclLibraryOverride missing("/nonexistent/libnccl.so.2");
  CHECK(error_message<lab::UsageError>([] { lab::load_nccl("--devices 0,1"); }) ==
        "--devices 0,1: NCCL is not available (/nonexistent/libnccl.so.2: cannot open shared object file: No "
        "such "
        "file or directory); set LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 "
        "wheel, or Debian's libnccl2)");
}

TEST_CASE("NCCL missing: making NCCL communicators stops at that line, and lab does not link NCCL",
          "[distributed]") {
  NcclLibraryOverride missing("/nonexistent/libnccl.so.2");
  auto cpu = lab::make_backend("cpu", lab::test::embedded_context());
  lab::DistributedSetup setup;
  setup.origin = "--devices 0,1";
  CHECK(lab::test::contains(
      error_message<lab::UsageError>([&] { lab::make_nccl_communicators({cpu.get()}, setup); }),
      "--devices 0,1: NCCL is not available (/nonexistent/libnccl.so.2: cannot open shared object file"));
  // lab starts where NCCL is absent: the library is opened at run time, never a link dependency.
  const lab::test::LabResult linked = lab::test::run_command("ldd " + lab::test::quoted(LAB_BINARY));
  REQUIRE(linked.exit_code == 0);
  CHECK(lab::test::contains(linked.out, "libc.so"));
  CHECK(!lab::test::contains(linked.out, "nccl"));
}

TEST_CASE("NCCL: a library without the functions is refused, naming the missing one", "[distributed]") {
  NcclLibraryOverride not_nccl("libm.so.6");
  CHECK(error_message<lab::UsageError>([] { lab::load_nccl("--devices all"); }) ==
        "--devices all: NCCL is not available (libm.so.6 has no ncclGetVersion); set "
        "LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 wheel, or Debian's "
        "libnccl2)");
}

TEST_CASE("NCCL: the CUDA toolkit's libnccl.so.2 loads with every function the layer uses", "[distributed]") {
  const std::string toolkit_library = toolkit_nccl();
  if (!std::filesystem::exists(toolkit_library)) {
    WARN("skipped: no " << toolkit_library << " on this machine");
    return;
  }
  NcclLibraryOverride toolkit(toolkit_library);
  const lab::NcclLibrary& nccl = lab::load_nccl("--devices 0,1");
  int version = 0;
  REQUIRE(nccl.get_version(&version) == ncclSuccess);
  CHECK(version / 10000 == 2);  // NCCL 2.x encodes its version as major*10000 + minor*100 + patch
  CHECK(std::string(nccl.get_error_string(ncclInvalidArgument)).size() > 0);
}

TEST_CASE("make_communicators: cpu ranks stay in one process, and bad setups are one-line errors",
          "[distributed]") {
  auto a = lab::make_backend("cpu", lab::test::embedded_context());
  auto b = lab::make_backend("cpu", lab::test::embedded_context());
  const std::vector<lab::Backend*> backends = {a.get(), b.get()};
  const auto communicators = lab::make_communicators(backends);
  REQUIRE(communicators.size() == 2);
  CHECK(communicators[1]->rank() == 1);
  CHECK(communicators[1]->size() == 2);

  lab::DistributedSetup two_nodes;
  two_nodes.node_count = 2;
  two_nodes.origin = "--devices 0,1";
  CHECK(error_message<lab::UsageError>([&] { lab::make_communicators(backends, two_nodes); }) ==
        "--devices 0,1: 2 processes need a rendezvous (--rendezvous FILE or --master host:port)");
  auto rendezvous = lab::make_file_rendezvous("unused");
  two_nodes.rendezvous = rendezvous.get();
  CHECK(error_message<lab::UsageError>([&] { lab::make_communicators(backends, two_nodes); }) ==
        "--devices 0,1: cpu ranks connect only within one process; across processes the ranks need cuda "
        "backends (NCCL)");
  lab::DistributedSetup out_of_range;
  out_of_range.node_rank = 1;
  CHECK(error_message<lab::UsageError>([&] { lab::make_communicators(backends, out_of_range); }) ==
        "--devices: node rank 1 of 1 nodes is out of range");
  CHECK(error_message<lab::UsageError>([&] { lab::make_communicators({}); }) ==
        "--devices: no ranks to connect");
}

TEST_CASE("NCCL communicators refuse a backend without CUDA streams before any NCCL work", "[distributed]") {
  if (!std::filesystem::exists(toolkit_nccl())) {
    WARN("skipped: no " << toolkit_nccl() << " on this machine");
    return;
  }
  NcclLibraryOverride toolkit(toolkit_nccl());
  auto cpu = lab::make_backend("cpu", lab::test::embedded_context());
  lab::DistributedSetup setup;
  setup.origin = "--devices 0,1";
  CHECK(error_message<lab::UsageError>([&] { lab::make_nccl_communicators({cpu.get()}, setup); }) ==
        "--devices 0,1: NCCL needs cuda backends, not cpu");
}

// The NCCL path on the one-GPU machine the [gpu] suite runs on: the library loads (LAB_NCCL_LIBRARY), one
// rank's communicator initialises, and its collectives return their input.
TEST_CASE("NCCL with one rank on one GPU: the all-reduce and the host collectives return their input",
          "[gpu][distributed]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  GpuRanks ranks(1);
  const size_t count = 4099;
  std::vector<float> input(count);
  std::mt19937 engine(5u);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& x : input) x = normal(engine);
  std::vector<float> result;
  double value = 2.75;
  std::string text = "rank zero";
  lab::run_rank_threads(ranks.pointers(), [&](int) {
    lab::Backend& backend = *ranks.raw[0];
    backend.use_on_this_thread();
    lab::DeviceBuffer buffer = backend.upload_vector(input);
    ranks.communicators[0]->all_reduce_sum(buffer.as<float>(), count);
    result = backend.download_vector<float>(buffer, count);
    ranks.communicators[0]->all_reduce_sum_host(&value, 1);
    ranks.communicators[0]->broadcast_host(text.data(), text.size(), 0);
    ranks.communicators[0]->barrier();
  });
  CHECK(result == input);
  CHECK(value == 2.75);
  CHECK(text == "rank zero");
}

TEST_CASE("NCCL all-reduce on 2 GPUs equals the float64 sum, the same bits on both", "[gpu][multi_gpu]") {
  LAB_REQUIRE_GPUS_OR_SKIP(2);
  GpuRanks ranks(2);
  const size_t count = (1u << 20) + 3;
  std::vector<std::vector<float>> inputs(2), results(2);
  for (int r = 0; r < 2; ++r) {
    std::mt19937 engine(77u + unsigned(r));
    std::normal_distribution<float> normal(0.0f, 2.0f);
    inputs[size_t(r)].resize(count);
    for (float& x : inputs[size_t(r)]) x = normal(engine);
  }
  std::vector<double> host_sums(2);
  std::vector<std::string> broadcasts(2);
  lab::run_rank_threads(ranks.pointers(), [&](int r) {
    lab::Backend& backend = *ranks.raw[size_t(r)];
    lab::Communicator& communicator = *ranks.communicators[size_t(r)];
    backend.use_on_this_thread();
    lab::DeviceBuffer buffer = backend.upload_vector(inputs[size_t(r)]);
    communicator.all_reduce_sum(buffer.as<float>(), count);
    results[size_t(r)] = backend.download_vector<float>(buffer, count);
    double value = r + 0.25;
    communicator.all_reduce_sum_host(&value, 1);
    host_sums[size_t(r)] = value;
    std::string text = r == 1 ? "rank one's" : "??????????";
    communicator.broadcast_host(text.data(), text.size(), 1);
    broadcasts[size_t(r)] = text;
    communicator.barrier();
  });
  for (size_t i = 0; i < count; ++i) {
    const double exact = double(inputs[0][i]) + double(inputs[1][i]);
    // One float addition of two values: the float32 rounding of the exact sum.
    if (results[0][i] != float(exact)) FAIL("element " << i << ": " << results[0][i] << " vs " << exact);
  }
  CHECK(std::memcmp(results[0].data(), results[1].data(), count * sizeof(float)) == 0);
  CHECK(host_sums == std::vector<double>{1.5, 1.5});
  CHECK(broadcasts == std::vector<std::string>{"rank one's", "rank one's"});
}

TEST_CASE("NCCL on 2 GPUs: a throwing rank makes the other fail with its message instead of hanging",
          "[gpu][multi_gpu]") {
  LAB_REQUIRE_GPUS_OR_SKIP(2);
  GpuRanks ranks(2);
  std::string other;
  const std::string error = lab::test::error_message<lab::UsageError>([&] {
    lab::run_rank_threads(ranks.pointers(), [&](int r) {
      lab::Backend& backend = *ranks.raw[size_t(r)];
      backend.use_on_this_thread();
      if (r == 1) throw lab::UsageError("rank 1's images are gone");
      try {
        lab::DeviceBuffer buffer = backend.alloc_array<float>(1024);
        ranks.communicators[0]->all_reduce_sum(buffer.as<float>(), 1024);  // waits on device for rank 1
        double value = 1;
        ranks.communicators[0]->all_reduce_sum_host(&value, 1);  // polls: sees rank 1's failure
      } catch (const lab::RuntimeError& e) {
        other = e.what();
        throw;
      }
    });
  });
  CHECK(error == "rank 1's images are gone");
  CHECK(other == "rank 1 failed: rank 1's images are gone");
}
