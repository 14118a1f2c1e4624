// Seeded mutation fuzz of scenario TOML: every scenario file of the checkout, mutated as bytes and as text
// (a number replaced by an extreme value, a line deleted or repeated), 300 cases in all, parsed and planned
// (runner, variants, parameters resolved) on the cpu backend. Every mutant plans or fails with one short line
// naming the file. LAB_FUZZ_SCALE=N runs N times as many (fuzz_support.hpp).
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/checkpoint_test_support.hpp"
#include "tests/fuzz_support.hpp"
#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"

namespace fs = std::filesystem;

using lab::test::fuzz::mutate;
using lab::test::fuzz::Outcomes;
using lab::test::fuzz::pick;
using lab::test::fuzz::Rng;

namespace {

// A number of `text` replaced by an extreme one, a line deleted or repeated, or a byte mutation.
void mutate_text(std::string& text, Rng& rng) {
  static const char* const kExtremes[] = {"0",     "-1",   "65536", "2147483648", "99999999999999999999",
                                          "1e308", "-0.0", "nan",   "inf",        "\"x\"",
                                          "[]",    "{}"};
  switch (rng() % 4) {
    case 0: {
      const size_t at = text.find_first_of("0123456789", pick(rng, 0, text.size()));
      if (at == std::string::npos) break;
      const size_t end = text.find_first_not_of("0123456789.eE-", at);
      text.replace(at, (end == std::string::npos ? text.size() : end) - at,
                   kExtremes[rng() % std::size(kExtremes)]);
      break;
    }
    case 1:
    case 2: {
      const size_t begin = text.rfind('\n', pick(rng, 0, text.size()));
      const size_t line_begin = begin == std::string::npos ? 0 : begin + 1;
      const size_t newline = text.find('\n', line_begin);
      const size_t line_end = newline == std::string::npos ? text.size() : newline + 1;
      const std::string line = text.substr(line_begin, line_end - line_begin);
      if (rng() % 2 != 0)
        text.erase(line_begin, line.size());
      else
        text.insert(line_begin, line);
      break;
    }
    default:
      mutate(text, 0, text.size(), rng);
      break;
  }
}

}  // namespace

TEST_CASE("mutated scenario files plan or fail with one line", "[scenario][fuzz]") {
  std::vector<std::string> originals;
  for (const fs::path& file : lab::scenario_files(fs::path(LAB_SOURCE_DIR) / "scenarios"))
    originals.push_back(lab::test::read_binary(file));
  REQUIRE(originals.size() >= 10);
  Rng rng(0x70e1f022);
  Outcomes outcomes;
  const double rss_before = lab::test::fuzz::peak_rss_mib();
  const int count = lab::test::fuzz::scaled_count(300);
  const std::string name = "mutant.toml";
  for (int i = 0; i < count; ++i) {
    std::string text = originals[size_t(i) % originals.size()];
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) mutate_text(text, rng);
    lab::test::fuzz::expect_clean([&] { lab::plan_scenario(lab::parse_scenario(text, name), "cpu"); }, name,
                                  "scenario mutant " + std::to_string(i), outcomes);
  }
  INFO(count << " mutants: " << outcomes.loaded << " planned, " << outcomes.rejected << " rejected, slowest "
             << outcomes.slowest_s << " s");
  CHECK(outcomes.loaded + outcomes.rejected == count);
  CHECK(outcomes.rejected > count / 4);
  CHECK(outcomes.loaded > 0);
  CHECK(lab::test::fuzz::peak_rss_mib() - rss_before < 1024);
}
