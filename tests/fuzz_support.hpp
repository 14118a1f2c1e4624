// The machinery the seeded mutation fuzzers share (checkpoints, safetensors, images, scenario TOML): byte
// mutations, the case count (raised by hand with LAB_FUZZ_SCALE for the long run recorded in
// docs/security.md) and the verdict on one mutant: a clean load, or a UsageError that is one short line
// starting with the file's name, within a time bound; anything else (another exception, a crash) fails.
#pragma once
#include <cstddef>
#include <functional>
#include <random>
#include <string>

namespace lab::test::fuzz {

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t begin, size_t end);  // uniform in [begin, end)

// One in-place mutation of `bytes[begin, end)`: byte flips, a bit flip, a swap, a zeroed range or a
// truncation, chosen by the RNG.
void mutate(std::string& bytes, size_t begin, size_t end, Rng& rng);

// `ci_count` times $LAB_FUZZ_SCALE (a positive integer; 1 when unset).
int scaled_count(int ci_count);

constexpr size_t kMaxMessageBytes = 400;  // an error line longer than this is a defect
constexpr double kMaxSecondsPerCase = 5;

struct Outcomes {
  int loaded = 0, rejected = 0;
  double slowest_s = 0;
};

// Runs `load` once and records its outcome; FAILs (naming `what`) on any exception other than UsageError,
// on a message that is not one line starting with `prefix` or is longer than kMaxMessageBytes, and on a case
// slower than kMaxSecondsPerCase.
void expect_clean(const std::function<void()>& load, const std::string& prefix, const std::string& what,
                  Outcomes& outcomes);

// The peak resident set of this process so far, in MiB.
double peak_rss_mib();

}  // namespace lab::test::fuzz
