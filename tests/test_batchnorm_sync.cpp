// Synchronised batch statistics (SyncBatchNorm) on the gradient tape: two data-parallel ranks, threads each
// with its own cpu-emulator backend and a ThreadCommunicator, each running half of a batch through two
// batch-statistics convs (the second with a residual) forward and back, against one rank running the whole
// batch on the unsynchronised kernels: the same outputs per image, the ranks' parameter gradients summing to
// the one rank's, the same running statistics on every rank. A control: without the synchronisation the
// ranks' outputs differ from the whole batch's by orders of magnitude more than the bar. [gpu] twin: two cuda
// backends on one GPU with the same thread communicator. The batchnorm_sync runner (rank 0 of R, the other
// ranks' sums emulated) on every case of scenarios/batchnorm_sync.toml, launched twice with the outputs
// re-poisoned in between; [gpu] twin.
#include <catch2/catch.hpp>

#include <memory>

#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "kernels/compare.hpp"
#include "kernels/runner.hpp"
#include "pipeline/distributed/rank_threads.hpp"
#include "pipeline/distributed/thread_communicator.hpp"
#include "pipeline/executor/gradient_tape.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

constexpr int kHeight = 6, kWidth = 5, kChannels = 8;

ConvSpec batchnorm_conv(const std::string& name, int c_in, uint64_t seed) {
  ConvSpec c;
  c.name = name, c.c_in = c_in, c.c_out = kChannels, c.kernel = 3;
  c.conv_weight = random_uniform(size_t(kChannels) * c_in * 9, -0.4f, 0.4f, seed);
  FrozenBatchNorm bn;
  bn.gamma = random_uniform(kChannels, 0.5f, 1.5f, seed + 1);
  bn.beta = random_uniform(kChannels, -0.5f, 0.5f, seed + 2);
  bn.mean = random_uniform(kChannels, -0.2f, 0.2f, seed + 3);
  bn.var = random_uniform(kChannels, 0.5f, 2.0f, seed + 4);
  c.bn = bn;
  fold_batchnorm(c);
  c.batch_statistics = true;
  return c;
}

// What one rank's tape gives for its images.
struct RankResult {
  std::vector<float> output;  // [batch, kChannels, kHeight, kWidth]
  reference::ConvGradients gradients;
  std::map<std::string, GradientTape::RunningStatistics> running;
};

// first, first + batch: the images of `all` ([images, channels, plane]) this rank runs.
std::vector<float> images(const std::vector<float>& all, int first, int batch, int channels) {
  const size_t per_image = size_t(channels) * kHeight * kWidth;
  return {all.begin() + long(first * per_image), all.begin() + long((first + batch) * per_image)};
}

// conv b(conv a(x)) + conv a(x) on `backend` for images [first, first + batch) of x and dy.
RankResult run_rank(Backend& backend, const ConvSpec& a, const ConvSpec& b, const std::vector<float>& x,
                    const std::vector<float>& dy, int first, int batch, Communicator* communicator) {
  GradientTape tape(backend);
  const TapeTensor input = tape.input(batch, 3, kHeight, kWidth);
  const TapeTensor hidden = tape.conv(a, input);
  const TapeTensor out = tape.conv(b, hidden, &hidden);
  if (communicator)
    tape.synchronise_batch_statistics(
        {[communicator](float* data, size_t count) { communicator->all_reduce_sum(data, count); },
         communicator->size()});
  tape.set_input(input, images(x, first, batch, 3));
  tape.forward();
  const DeviceBuffer seed = backend.upload_vector(images(dy, first, batch, kChannels));
  tape.backward({{out, &seed}});
  RankResult r;
  r.output = backend.download_vector<float>(tape.buffer(out), out.count());
  r.gradients = tape.conv_gradients();
  r.running = tape.running_statistics();
  return r;
}

// Two ranks of one image each, synchronised or not.
std::vector<RankResult> two_ranks(const std::string& backend_name, const ConvSpec& a, const ConvSpec& b,
                                  const std::vector<float>& x, const std::vector<float>& dy, bool synchronised) {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> pointers;
  for (int r = 0; r < 2; ++r) {
    backends.push_back(make_backend(backend_name, test::embedded_context()));
    pointers.push_back(backends.back().get());
  }
  std::vector<std::unique_ptr<Communicator>> communicators = make_thread_communicators(pointers);
  std::vector<Communicator*> ranks;
  for (const auto& c : communicators) ranks.push_back(c.get());
  std::vector<RankResult> results(2);
  run_rank_threads(ranks, [&](int r) {
    results[size_t(r)] =
        run_rank(*backends[size_t(r)], a, b, x, dy, r, 1, synchronised ? ranks[size_t(r)] : nullptr);
  });
  return results;
}

std::vector<double> widened(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// The two ranks' outputs side by side against the whole batch's: relative L2.
double output_error(const std::vector<RankResult>& ranks, const RankResult& whole) {
  std::vector<float> joined = ranks[0].output;
  joined.insert(joined.end(), ranks[1].output.begin(), ranks[1].output.end());
  return test::relative_l2(joined, whole.output);
}

void check_two_ranks(const std::string& backend_name) {
  const ConvSpec a = batchnorm_conv("a", 3, 10), b = batchnorm_conv("b", kChannels, 20);
  const std::vector<float> x = random_uniform(size_t(2) * 3 * kHeight * kWidth, 0.0f, 1.0f, 30);
  const std::vector<float> dy = random_uniform(size_t(2) * kChannels * kHeight * kWidth, -1.0f, 1.0f, 31);
  auto backend = make_backend(backend_name, test::embedded_context());
  const RankResult whole = run_rank(*backend, a, b, x, dy, 0, 2, nullptr);
  const std::vector<RankResult> ranks = two_ranks(backend_name, a, b, x, dy, true);

  // 1e-5: the synchronised path sums each rank's float64 partial sums after rounding them to float32 (the
  // all-reduce's type), the one rank keeps float64 to the end: a relative 2^-24 per sum, through two convs.
  const double out_error = output_error(ranks, whole);
  CHECK(out_error <= 1e-5);
  double worst = 0;
  for (const char* conv : {"a", "b"}) {
    const reference::ConvGradient &g0 = ranks[0].gradients.at(conv), &g1 = ranks[1].gradients.at(conv),
                                  &want = whole.gradients.at(conv);
    const auto summed = [](const std::vector<double>& p, const std::vector<double>& q) {
      std::vector<double> s = p;
      for (size_t i = 0; i < s.size(); ++i) s[i] += q[i];
      return s;
    };
    for (const auto& [what, got, expected] :
         {std::tuple{"conv.weight", summed(g0.weight, g1.weight), want.weight},
          std::tuple{"bn.weight", summed(g0.gamma, g1.gamma), want.gamma},
          std::tuple{"bn.bias", summed(g0.beta, g1.beta), want.beta}}) {
      const double rel = test::relative_l2(got, expected);
      INFO(conv << "." << what << ": relative L2 " << rel);
      CHECK(rel <= 1e-5);
      worst = std::max(worst, rel);
    }
    // Every rank moved its running statistics by the whole batch's (bit-identical over the ranks).
    const GradientTape::RunningStatistics &r0 = ranks[0].running.at(conv), &r1 = ranks[1].running.at(conv),
                                          &w = whole.running.at(conv);
    CHECK(r0.mean == r1.mean);
    CHECK(r0.var == r1.var);
    CHECK(test::relative_l2(widened(r0.mean), widened(w.mean)) <= 1e-6);
    CHECK(test::relative_l2(widened(r0.var), widened(w.var)) <= 1e-6);
  }
  // The control: each rank normalising with its own image's statistics is far from the whole batch.
  const double unsynchronised = output_error(two_ranks(backend_name, a, b, x, dy, false), whole);
  CHECK(unsynchronised >= 1e-2);
  WARN(backend_name << ", synchronised: output relative L2 " << out_error << ", worst summed gradient " << worst
                                           << "; unsynchronised output " << unsynchronised);
}

// Every case of scenarios/batchnorm_sync.toml that runs on `backend_name`, each instance launched twice, its
// outputs re-poisoned before the second: every element is written by the launch.
void check_runner(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const ScenarioPlan plan =
      plan_scenario(load_scenario(std::filesystem::path(LAB_SOURCE_DIR) / "scenarios" / "batchnorm_sync.toml"),
                    backend_name);
  REQUIRE(plan.runs.size() >= 10);  // 5 cases x 2 seeds on either backend
  for (const PlannedRun& run : plan.runs) {
    auto instance = run.runner->instantiate(*backend, run.variant, run.params, run.seed);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) instance->poison();
      instance->launch();
      for (const OutputCheck& c : instance->check(run.tolerance)) {
        INFO("case '" << run.case_name << "' seed " << run.seed << " round " << round << " " << c.output
                      << ": rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs);
        CHECK(c.pass);
      }
    }
  }
}

}  // namespace

TEST_CASE("batchnorm_sync runner: rank 0 of R ranks against the whole batch's float64 reference on cpu",
          "[batchnorm_batch][distributed]") {
  check_runner("cpu");
}

TEST_CASE("batchnorm_sync runner: rank 0 of R ranks against the whole batch's float64 reference on cuda",
          "[batchnorm_batch][distributed][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_runner("cuda");
}

TEST_CASE("synchronised batch statistics: two cpu ranks of one image equal one rank of both",
          "[batchnorm_batch][distributed]") {
  check_two_ranks("cpu");
}

TEST_CASE("synchronised batch statistics: two cuda ranks of one image equal one rank of both",
          "[batchnorm_batch][distributed][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_two_ranks("cuda");
}
