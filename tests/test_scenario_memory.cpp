// A scenario case whose parameters are in range but whose buffers cannot be allocated (issue 16 item 6) fails
// alone with a one-line reason; the other cases still run and the summary table still prints.
#include <catch2/catch.hpp>

#include "tests/test_helpers.hpp"

TEST_CASE("a case that cannot allocate fails alone and the table still prints", "[scenario][limits]") {
  lab::test::ScratchDir dir("scenario-oom");
  const std::filesystem::path toml = dir.path / "huge.toml";
  // BH x N_CTX_Q x HEAD_DIM floats = 35 TB for Q alone: every parameter is within its range.
  lab::test::write_file(toml, R"(kernel = "flash_attn2_fwd"
variants = ["tiled"]
backends = ["cpu"]
seeds = [1]

[[case]]
name = "small"
params = { BH = 1, N_CTX_Q = 8, N_CTX_K = 8, HEAD_DIM = 16 }

[[case]]
name = "too large for memory"
params = { BH = 65536, N_CTX_Q = 1048576, N_CTX_K = 1048576, HEAD_DIM = 128 }
)");
  const lab::test::LabResult r =
      lab::test::run_lab("scenario run " + lab::test::quoted(toml.string()) + " --backend cpu");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.empty());
  CHECK(lab::test::contains(r.out, "PASS"));
  CHECK(lab::test::contains(r.out, "ERROR"));
  CHECK(lab::test::contains(r.out, "out of memory: the case's buffers "));
  CHECK(lab::test::contains(r.out, "1 passed, 1 failed"));
}
