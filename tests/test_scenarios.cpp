// Scenario files: parsing (every key, every error with file:line), expansion into runs, parameter rules on a
// tiny fake runner, and every file under scenarios/ run on the cpu backend (and on cuda in the [gpu] twin).
#include <catch2/catch.hpp>

#include <set>

#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "lab/report.hpp"
#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_scenario(text, "x.toml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(parsed without error)";
}

// A spec that is never registered: only its parameter table matters.
const KernelSpec& fake_attention_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "fake_attention",
      .family = "test",
      .description = "parameter rules only",
      .source = "none.cu",
      .variants = {{"v1", ""}, {"v2", ""}},
      .params = {{"HEAD_DIM", K::Int, "64", "head dimension", 1, 256, true},
                 {"SCALE", K::Float, "0.125", "softmax scale", 0, 10},
                 {"CAUSAL", K::Bool, "false", "causal mask"},
                 {"LAYOUT", K::Choice, "bhnd", "layout", -1e300, 1e300, false, {"bhnd", "bnhd"}}}};
  return spec;
}

std::string resolve_error(const Params& given) {
  try {
    resolve_params(fake_attention_spec(), given);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(resolved without error)";
}

std::vector<fs::path> repository_scenarios() {
  return scenario_files(fs::path(LAB_SOURCE_DIR) / "scenarios");
}

void run_every_scenario_on(const std::string& backend) {
  const auto files = repository_scenarios();
  if (files.empty()) {
    WARN("no scenario files under " << LAB_SOURCE_DIR << "/scenarios");
    return;
  }
  BackendSet backends(test::embedded_context());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string() << " on " << backend) {
      const ScenarioPlan plan = plan_scenario(load_scenario(file), backend);
      for (const PlannedRun& run : plan.runs) {
        const RunResult r = execute_run(run, backends);
        INFO(run.scenario_path << ":" << run.case_line << " case '" << run.case_name << "' variant "
                               << run.variant << " seed " << run.seed << "\n"
                               << r.error);
        for (const OutputCheck& c : r.checks)
          INFO(c.output << ": rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs
                        << " non-finite " << c.metrics.non_finite << " (tolerance " << c.tolerance.rel_l2
                        << ", " << c.tolerance.max_abs << ")");
        CHECK(r.pass);
      }
    }
  }
}

}  // namespace

TEST_CASE("a scenario file parses into kernel, variants, backends, seeds and cases", "[scenario]") {
  const Scenario s = parse_scenario(R"(# comment
kernel = "detect_decode"
variants = ["v1_fused"]
backends = ["cpu", "cuda"]
seeds = [1, 2, 3]

[[case]]
name = "small"
params = { B = 2, IMG_W = 320, SCALE = 0.5, FLAG = true, MODE = "fast" }
tolerance = { rel_l2 = 1e-6, max_abs = 1e-3 }

[[case]]
name = "big"
params = { B = 32 }
backends = ["cuda"]
bench = true
tolerance = { max_abs = 0.5 }
)",
                                    "detect.toml");
  CHECK(s.kernel == "detect_decode");
  CHECK(s.kernel_line == 2);
  CHECK(s.variants == std::vector<std::string>{"v1_fused"});
  CHECK(s.backends == std::vector<std::string>{"cpu", "cuda"});
  CHECK(s.seeds == std::vector<uint64_t>{1, 2, 3});
  REQUIRE(s.cases.size() == 2);
  CHECK(s.cases[0].name == "small");
  CHECK(s.cases[0].line == 7);
  CHECK(s.cases[0].params ==
        Params{{"B", "2"}, {"IMG_W", "320"}, {"SCALE", "0.5"}, {"FLAG", "true"}, {"MODE", "fast"}});
  REQUIRE(s.cases[0].tolerance);
  CHECK(s.cases[0].tolerance->rel_l2 == 1e-6);
  CHECK(s.cases[0].tolerance->max_abs == 1e-3);
  CHECK(!s.cases[0].bench);
  CHECK(s.cases[0].backends.empty());
  CHECK(s.cases[1].line == 12);
  CHECK(s.cases[1].bench);
  CHECK(s.cases[1].backends == std::vector<std::string>{"cuda"});
  CHECK(s.cases[1].tolerance->max_abs == 0.5);
  CHECK(s.cases[1].tolerance->rel_l2 == Tolerance{}.rel_l2);
}

TEST_CASE("scenario errors name the file and line", "[scenario]") {
  CHECK(parse_error("kernel = \"k\"\n[[case]]\nname = \"unterminated\n").rfind("x.toml:3: ", 0) == 0);
  CHECK(parse_error("kernel = \"k\"\nkernal = 1\n[[case]]\nname = \"a\"\n") ==
        "x.toml:2: unknown key 'kernal' (valid: kernel, variants, backends, seeds, case)");
  CHECK(parse_error("kernel = \"k\"\n[[case]]\nname = \"a\"\nbenchh = true\n") ==
        "x.toml:4: unknown key 'benchh' in [[case]] (valid: name, params, tolerance, backends, bench)");
  CHECK(parse_error("kernel = \"k\"\n[[case]]\nname = \"a\"\ntolerance = { rel = 1 }\n") ==
        "x.toml:4: unknown key 'rel' in tolerance (valid: rel_l2, max_abs)");
  CHECK(parse_error("kernel = 3\n[[case]]\nname = \"a\"\n") == "x.toml:1: 'kernel' must be a string");
  CHECK(parse_error("kernel = \"k\"\nbackends = [\"gpu\"]\n[[case]]\nname = \"a\"\n") ==
        "x.toml:2: unknown backend 'gpu' in 'backends' (valid: cpu, cuda)");
  CHECK(parse_error("kernel = \"k\"\n\n[[case]]\nparams = { B = 1 }\n") == "x.toml:3: [[case]] needs a name");
  CHECK(parse_error("kernel = \"k\"\n[[case]]\nname = \"a\"\nparams = { B = [1] }\n") ==
        "x.toml:4: parameter 'B' must be an integer, float, boolean or string");
  CHECK(parse_error("kernel = \"k\"\nseeds = [-1]\n[[case]]\nname = \"a\"\n") ==
        "x.toml:2: 'seeds' elements must be non-negative integers");
  CHECK(parse_error("[[case]]\nname = \"a\"\n") == "x.toml:1: missing 'kernel = \"NAME\"'");
  CHECK(parse_error("kernel = \"k\"\n") == "x.toml:1: no [[case]] tables");
}

TEST_CASE("planning validates names and parameters with file:line and expands the runs", "[scenario]") {
  const Runner& runner = Registry::instance().get("detect_decode");
  auto plan_error = [](const std::string& text) -> std::string {
    try {
      plan_scenario(parse_scenario(text, "p.toml"), "cpu");
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(planned without error)";
  };
  CHECK(plan_error("\nkernel = \"nope\"\n[[case]]\nname = \"a\"\n")
            .rfind("p.toml:2: unknown kernel 'nope'", 0) == 0);
  CHECK(plan_error("kernel = \"detect_decode\"\nvariants = [\"zz\"]\n[[case]]\nname = \"a\"\n")
            .rfind("p.toml:2: unknown variant 'zz'", 0) == 0);
  CHECK(plan_error("kernel = \"detect_decode\"\n[[case]]\nname = \"a\"\nparams = { NOPE = 1 }\n")
            .rfind("p.toml:2: case 'a': unknown parameter 'NOPE'", 0) == 0);

  const Scenario s = parse_scenario(R"(kernel = "detect_decode"
seeds = [4, 5]
[[case]]
name = "everywhere"
params = { B = 2 }
[[case]]
name = "gpu only"
backends = ["cuda"]
)",
                                    "p.toml");
  const ScenarioPlan plan = plan_scenario(s, "cpu");
  REQUIRE(plan.runs.size() == runner.variants().size() * 2);
  CHECK(plan.runs[0].case_name == "everywhere");
  CHECK(plan.runs[0].backend == "cpu");
  CHECK(plan.runs[0].params.at("B") == "2");
  CHECK(plan.runs[0].params.size() == runner.params().size());  // defaults filled
  std::set<uint64_t> seeds;
  for (const PlannedRun& r : plan.runs) seeds.insert(r.seed);
  CHECK(seeds == std::set<uint64_t>{4, 5});

  const ScenarioPlan all = plan_scenario(s, "");
  if (!cuda_device_present()) {
    REQUIRE(all.skipped.size() == 1);
    CHECK(all.skipped[0].find("no CUDA device is available") != std::string::npos);
  }
}

TEST_CASE("parameter rules: power of two, range, type, choices, unknown names", "[scenario]") {
  const Params defaults = resolve_params(fake_attention_spec(), {});
  CHECK(defaults.at("HEAD_DIM") == "64");
  CHECK(defaults.at("LAYOUT") == "bhnd");
  CHECK(resolve_error({{"HEAD_DIM", "48"}}).find("HEAD_DIM=48") != std::string::npos);
  CHECK(resolve_error({{"HEAD_DIM", "48"}}).find("power of two") != std::string::npos);
  CHECK(resolve_error({{"HEAD_DIM", "512"}}).find("power of two") != std::string::npos);
  CHECK(resolve_error({{"HEAD_DIM", "1.5"}}).find("integer") != std::string::npos);
  CHECK(resolve_error({{"SCALE", "11"}}).find("[0, 10]") != std::string::npos);
  CHECK(resolve_error({{"CAUSAL", "maybe"}}).find("true or false") != std::string::npos);
  CHECK(resolve_error({{"LAYOUT", "nchw"}}).find("bhnd, bnhd") != std::string::npos);
  CHECK(resolve_error({{"HEADDIM", "64"}}) ==
        "unknown parameter 'HEADDIM' for fake_attention (did you mean 'HEAD_DIM'?)");
  CHECK(resolve_error({{"WIDTH", "64"}}) ==
        "unknown parameter 'WIDTH' for fake_attention (valid: HEAD_DIM, SCALE, CAUSAL, LAYOUT)");
  CHECK(resolve_error({{"HEAD_DIM", "128"}, {"CAUSAL", "true"}}) == "(resolved without error)");
}

TEST_CASE("every scenario file under scenarios/ parses and plans", "[scenario]") {
  for (const fs::path& file : repository_scenarios()) {
    INFO(file.string());
    CHECK_NOTHROW(plan_scenario(load_scenario(file), ""));
  }
}

TEST_CASE("every scenario file passes on the cpu backend", "[scenario][emulator]") {
  run_every_scenario_on("cpu");
}

TEST_CASE("every scenario file passes on the cuda backend", "[scenario][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_every_scenario_on("cuda");
}
