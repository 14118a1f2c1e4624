// Run reports to and from JSON (harness/report_json.hpp): what one side writes the other reads back whole,
// and the reader takes what `lab run --json` prints.
#include <catch2/catch.hpp>

#include <limits>

#include "harness/report_json.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

OutputCheck sample_check(const std::string& name, bool pass) {
  OutputCheck c;
  c.output = name;
  c.shape = {2, 3, 8400};
  c.metrics.max_abs = 1.2345678901234567e-7;
  c.metrics.max_rel = 0.1 + 0.2;  // not exactly representable in a short decimal
  c.metrics.rel_l2 = 3.0e-300;
  c.metrics.worst_index = std::numeric_limits<size_t>::max() - 5;
  c.metrics.worst_out = -42.5;
  c.metrics.worst_ref = -42.500001;
  c.metrics.count = 50400;
  c.metrics.non_finite = 3;
  c.tolerance = {1e-6, 2.5e-4};
  c.pass = pass;
  return c;
}

void check_same(const OutputCheck& a, const OutputCheck& b) {
  CHECK(a.output == b.output);
  CHECK(a.shape == b.shape);
  CHECK(a.metrics.max_abs == b.metrics.max_abs);
  CHECK(a.metrics.max_rel == b.metrics.max_rel);
  CHECK(a.metrics.rel_l2 == b.metrics.rel_l2);
  CHECK(a.metrics.worst_index == b.metrics.worst_index);
  CHECK(a.metrics.worst_out == b.metrics.worst_out);
  CHECK(a.metrics.worst_ref == b.metrics.worst_ref);
  CHECK(a.metrics.count == b.metrics.count);
  CHECK(a.metrics.non_finite == b.metrics.non_finite);
  CHECK(a.tolerance.rel_l2 == b.tolerance.rel_l2);
  CHECK(a.tolerance.max_abs == b.tolerance.max_abs);
  CHECK(a.pass == b.pass);
}

}  // namespace

TEST_CASE("a kernel report written to JSON text and read back is the same report", "[harness]") {
  KernelReport written{"detect_decode", "v1_fused", "cpu", "host CPU (2 threads)",
                       {{"B", "2"}, {"IMG_H", "96"}},
                       18446744073709551557ull, 0.123456789012345678, false,
                       {sample_check("boxes", true), sample_check("scores", false)}};
  const std::string text = kernel_report_json(written).dump();
  const KernelReport read = kernel_report_from_json(nlohmann::json::parse(text));
  CHECK(read.kernel == written.kernel);
  CHECK(read.variant == written.variant);
  CHECK(read.backend == written.backend);
  CHECK(read.device == written.device);
  CHECK(read.params == written.params);
  CHECK(read.seed == written.seed);
  CHECK(read.time_ms == written.time_ms);
  CHECK(read.pass == written.pass);
  REQUIRE(read.checks.size() == 2);
  check_same(read.checks[0], written.checks[0]);
  check_same(read.checks[1], written.checks[1]);
}

TEST_CASE("a kernel report without one of its keys is refused", "[harness]") {
  nlohmann::json j = kernel_report_json(KernelReport{"k", "v", "cpu", "d", {}, 1, 1.0, true, {}});
  j.erase("seed");
  CHECK_THROWS_AS(kernel_report_from_json(j), nlohmann::json::exception);
}

TEST_CASE("the report reader reads what lab run --json prints", "[harness][cli][emulator]") {
  const test::LabResult run =
      test::run_lab("run detect_decode --backend cpu --param B=2 --param IMG_H=64 --param IMG_W=96 --seed 3 "
                    "--json");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const KernelReport report = kernel_report_from_json(nlohmann::json::parse(run.out));
  CHECK(report.kernel == "detect_decode");
  CHECK(report.backend == "cpu");
  CHECK(report.seed == 3);
  CHECK(report.params.at("B") == "2");
  CHECK(report.params.at("IMG_W") == "96");
  CHECK(report.pass);
  CHECK(!report.checks.empty());
  CHECK(report.time_ms > 0);
}
