// The thread communicator (ranks that are threads, each on its own cpu-emulator backend): device all-reduce
// against a float64 sum computed here, bit-identical on every rank; the host all-reduce, broadcast and
// barrier; and a throwing rank making the others fail with its message instead of hanging.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <stdexcept>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/rank_threads.hpp"
#include "pipeline/distributed/thread_communicator.hpp"
#include "tests/test_helpers.hpp"

namespace {

constexpr auto kPatience = std::chrono::seconds(20);

struct Ranks {
  std::vector<std::unique_ptr<lab::Backend>> backends;
  std::vector<std::unique_ptr<lab::Communicator>> communicators;
  std::vector<lab::Communicator*> pointers() const {
    std::vector<lab::Communicator*> p;
    for (const auto& c : communicators) p.push_back(c.get());
    return p;
  }
};

Ranks cpu_ranks(int count) {
  Ranks r;
  std::vector<lab::Backend*> raw;
  for (int i = 0; i < count; ++i) {
    r.backends.push_back(lab::make_backend("cpu", lab::test::embedded_context()));
    raw.push_back(r.backends.back().get());
  }
  r.communicators = lab::make_thread_communicators(raw);
  return r;
}

// Runs the ranks with a deadline: when they have not finished after kPatience, every communicator is aborted
// (which releases any waiting rank) and the test fails. Returns the first rank's error message, "" if none.
std::string run_without_hanging(Ranks& ranks, const std::function<void(int)>& body) {
  auto done = std::async(std::launch::async, [&]() -> std::string {
    try {
      lab::run_rank_threads(ranks.pointers(), body);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  if (done.wait_for(kPatience) != std::future_status::ready) {
    for (auto& c : ranks.communicators) c->abort("the test's deadline");
    done.wait();
    FAIL("the ranks did not finish within " << kPatience.count() << " s");
  }
  return done.get();
}

std::vector<float> seeded_floats(unsigned seed, size_t count) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(count);
  for (float& x : v) x = normal(engine);
  return v;
}

void check_device_all_reduce(int rank_count, size_t count) {
  Ranks ranks = cpu_ranks(rank_count);
  std::vector<std::vector<float>> inputs, results;
  results.resize(size_t(rank_count));
  for (int r = 0; r < rank_count; ++r) inputs.push_back(seeded_floats(1000u + unsigned(r), count));

  const std::string error = run_without_hanging(ranks, [&](int r) {
    lab::Backend& backend = *ranks.backends[size_t(r)];
    lab::DeviceBuffer buffer = backend.upload_vector(inputs[size_t(r)]);
    ranks.communicators[size_t(r)]->all_reduce_sum(buffer.as<float>(), count);
    results[size_t(r)] = backend.download_vector<float>(buffer, count);
  });
  REQUIRE(error.empty());

  double worst = 0, allowed_worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < rank_count; ++r) {
      exact += double(inputs[size_t(r)][i]);
      magnitude += std::fabs(double(inputs[size_t(r)][i]));
    }
    // rank_count - 1 float additions, each rounding by at most half an ulp of a partial sum <= magnitude.
    const double allowed = double(rank_count - 1) * std::ldexp(1.0, -24) * magnitude;
    const double error_here = std::fabs(double(results[0][i]) - exact);
    worst = std::max(worst, error_here);
    allowed_worst = std::max(allowed_worst, allowed);
    if (error_here > allowed) FAIL("element " << i << ": " << results[0][i] << " vs " << exact);
  }
  INFO("max abs error " << worst << " (bound up to " << allowed_worst << ")");
  for (int r = 1; r < rank_count; ++r)
    CHECK(std::memcmp(results[size_t(r)].data(), results[0].data(), count * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE(
    "thread communicator: device all-reduce of 2 and 3 cpu ranks equals the float64 sum, same bits "
    "everywhere",
    "[distributed]") {
  SECTION("2 ranks") {
    check_device_all_reduce(2, 10007);
  }
  SECTION("3 ranks") {
    check_device_all_reduce(3, 4099);
  }
  SECTION("3 ranks, fewer values than ranks") {
    check_device_all_reduce(3, 2);
  }
}

TEST_CASE("thread communicator: host all-reduce, broadcast and barrier", "[distributed]") {
  Ranks ranks = cpu_ranks(3);
  std::vector<std::vector<double>> sums(3);
  std::vector<std::string> received(3);
  std::vector<int> after_barrier(3, -1);
  std::atomic<int> arrived{0};
  const std::string error = run_without_hanging(ranks, [&](int r) {
    lab::Communicator& c = *ranks.communicators[size_t(r)];
    CHECK(c.rank() == r);
    CHECK(c.size() == 3);
    std::vector<double> values = {double(r + 1), 0.5 * r, r == 2 ? 1e-3 : 0.0};
    c.all_reduce_sum_host(values.data(), values.size());
    sums[size_t(r)] = values;

    std::string text = r == 1 ? "from rank one" : "?????????????";
    c.broadcast_host(text.data(), text.size(), 1);
    received[size_t(r)] = text;

    ++arrived;
    c.barrier();
    after_barrier[size_t(r)] = arrived.load();
  });
  REQUIRE(error.empty());
  for (int r = 0; r < 3; ++r) {
    CHECK(sums[size_t(r)] == std::vector<double>{6.0, 1.5, 1e-3});
    CHECK(received[size_t(r)] == "from rank one");
    CHECK(after_barrier[size_t(r)] == 3);  // nobody leaves the barrier before everybody reached it
  }
}

TEST_CASE("thread communicator: a throwing rank makes the others fail with its message instead of hanging",
          "[distributed]") {
  Ranks ranks = cpu_ranks(3);
  std::vector<std::string> others(3);
  const std::string error = run_without_hanging(ranks, [&](int r) {
    if (r == 1) throw lab::UsageError("the data loader of rank 1 broke");
    try {
      double value = 1;
      ranks.communicators[size_t(r)]->all_reduce_sum_host(&value, 1);
    } catch (const lab::RuntimeError& e) {
      others[size_t(r)] = e.what();
      throw;
    }
  });
  CHECK(error == "the data loader of rank 1 broke");  // the cause, not a follower's report
  CHECK(others[0] == "rank 1 failed: the data loader of rank 1 broke");
  CHECK(others[2] == "rank 1 failed: the data loader of rank 1 broke");
}

TEST_CASE("thread communicator: ranks that disagree on the count fail on every rank, naming both counts",
          "[distributed]") {
  Ranks ranks = cpu_ranks(2);
  std::vector<std::string> messages(2);
  run_without_hanging(ranks, [&](int r) {
    std::vector<double> values(size_t(r + 2), 1.0);
    try {
      ranks.communicators[size_t(r)]->all_reduce_sum_host(values.data(), values.size());
    } catch (const lab::RuntimeError& e) {
      messages[size_t(r)] = e.what();
    }
  });
  CHECK(messages[0] == "rank 0: all_reduce_sum_host of 2 values, but rank 1 gave 3");
  CHECK(messages[1] == "rank 1: all_reduce_sum_host of 3 values, but rank 0 gave 2");
}
