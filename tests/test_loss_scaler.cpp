// LossScaler (pipeline/train/loss_scaler): GradScaler's update rule against a reference written here from
// PyTorch's documented behaviour (growth_factor 2, backoff_factor 0.5, growth_interval 2000, init_scale
// 2^16): a long run of finite steps with overflows at chosen places, and the hand-computed states around the
// first growth and the first backoff.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "pipeline/train/loss_scaler.hpp"

using namespace lab::train;

namespace {

// The scale before step `n` (0-based) of a run whose steps in `overflows` had a non-finite gradient: the
// exponent starts at 16, drops by one at every overflow and rises by one at the end of every stretch of
// 2000 finite steps counted from the start or from the last overflow or growth.
double reference_scale(long long n, const std::set<long long>& overflows) {
  int exponent = 16;
  long long run = 0;
  for (long long i = 0; i < n; ++i) {
    if (overflows.count(i)) {
      --exponent, run = 0;
    } else if (++run == 2000) {
      ++exponent, run = 0;
    }
  }
  return std::ldexp(1.0, exponent);
}

}  // namespace

TEST_CASE("LossScaler: growth after 2000 finite steps, backoff and a skipped step on an overflow",
          "[loss_scaler]") {
  LossScaler s;
  CHECK(s.scale() == 65536.0);
  for (int i = 0; i < 1999; ++i) REQUIRE(s.update(true));
  CHECK(s.scale() == 65536.0);
  CHECK(s.state().growth_tracker == 1999);
  CHECK(s.update(true));  // the 2000th: doubled, the count restarts
  CHECK(s.state() == LossScaleState{131072.0, 0, 0});
  CHECK_FALSE(s.update(false));  // an overflow: the step is skipped, the scale halved
  CHECK(s.state() == LossScaleState{65536.0, 0, 1});
  CHECK_FALSE(s.update(false));
  CHECK(s.state() == LossScaleState{32768.0, 0, 2});
  CHECK(s.update(true));
  CHECK(s.state() == LossScaleState{32768.0, 1, 2});

  const LossScaleState resumed{8.0, 1999, 5};  // a state continues where it was saved
  LossScaler from(resumed);
  CHECK(from.update(true));
  CHECK(from.state() == LossScaleState{16.0, 0, 5});
}

TEST_CASE("LossScaler: 10,000 steps with overflows follow the reference", "[loss_scaler]") {
  const std::set<long long> overflows = {0, 1, 2, 700, 2701, 2702, 5000, 9999};
  LossScaler s;
  long long skipped = 0;
  for (long long n = 0; n < 10000; ++n) {
    INFO("step " << n);
    REQUIRE(s.scale() == reference_scale(n, overflows));
    const bool finite = !overflows.count(n);
    REQUIRE(s.update(finite) == finite);
    skipped += !finite;
  }
  CHECK(s.state().skipped_steps == skipped);
  CHECK(s.scale() == reference_scale(10000, overflows));
}
