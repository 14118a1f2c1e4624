// Seeded mutation fuzz of the image decoders: a small JPEG, PNG and BMP, each mutated in its header (where
// sizes, markers and chunk lengths live) and anywhere, 300 cases in all. Every mutant decodes or fails with
// one short line naming the file, quickly and within bounded memory (the size limit of image.hpp).
// LAB_FUZZ_SCALE=N runs N times as many (fuzz_support.hpp).
#include <catch2/catch.hpp>

#include "tests/fuzz_support.hpp"
#include "tests/image_bytes_support.hpp"
#include "pipeline/image/image.hpp"

using lab::test::fuzz::mutate;
using lab::test::fuzz::Outcomes;
using lab::test::fuzz::Rng;

TEST_CASE("mutated JPEG, PNG and BMP files decode or fail with one line", "[image][fuzz]") {
  Rng rng(0x1a6e5eed);
  Outcomes outcomes;
  const double rss_before = lab::test::fuzz::peak_rss_mib();
  const int per_format = lab::test::fuzz::scaled_count(100);
  for (const std::string format : {"jpg", "png", "bmp"}) {
    const std::string original = lab::test::small_image_bytes(format);
    const std::string name = "mutant." + format;
    for (int i = 0; i < per_format; ++i) {
      std::string bytes = original;
      const size_t header = format == "jpg" ? 700 : format == "png" ? 64 : 54;
      for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n)
        mutate(bytes, 0, i % 3 == 0 ? bytes.size() : header, rng);
      const std::vector<uint8_t> input(bytes.begin(), bytes.end());
      lab::test::fuzz::expect_clean([&] { lab::decode_image_bytes(input, name); }, name,
                                    format + " mutant " + std::to_string(i), outcomes);
    }
  }
  INFO(3 * per_format << " mutants: " << outcomes.loaded << " decoded, " << outcomes.rejected
                      << " rejected, slowest " << outcomes.slowest_s << " s");
  CHECK(outcomes.loaded + outcomes.rejected == 3 * per_format);
  CHECK(outcomes.rejected > 0);
  CHECK(outcomes.loaded > 0);
  CHECK(lab::test::fuzz::peak_rss_mib() - rss_before < 1024);
}
