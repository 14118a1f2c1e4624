// `lab scenario run FILE...` (every case x variant x backend x seed, a summary table, exit 1 on any failure)
// and `lab scenario list` (the scenario files of the scenarios directory).
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "harness/report_json.hpp"
#include "lab/report.hpp"
#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

struct ScenarioRunOptions {
  std::vector<std::string> files;
  std::string backend;
  bool json = false;
  bool no_bench_cases = false;
};

void run_files(const ScenarioRunOptions& o, CliState& state) {
  BackendSet backends(state.context());
  if (!o.backend.empty()) backends.get(o.backend);  // fails now, one line, when the backend is not here
  const BatchResult batch = run_scenario_files(o.files, o.backend, backends, !o.json, o.no_bench_cases);
  if (count_failed(batch.results) > 0) state.exit_code = 1;
  if (o.json) {
    const size_t failed = count_failed(batch.results);
    nlohmann::json out = {{"runs", summary_json(batch.results)},
                          {"skipped", batch.skipped},
                          {"passed", batch.results.size() - failed},
                          {"failed", failed}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const std::string& s : batch.skipped) std::cout << "note: " << printable(s) << "\n";
  print_summary(std::cout, batch.results);
}

void list_files(bool json, CliState& state) {
  const auto dir = state.scenarios_directory();
  std::vector<std::string> errors;
  const std::vector<Scenario> scenarios = load_scenario_dir(dir, errors);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Scenario& s : scenarios) {
      nlohmann::json cases = nlohmann::json::array();
      for (const ScenarioCase& c : s.cases) cases.push_back({{"name", c.name}, {"bench", c.bench}});
      out.push_back({{"file", s.path},
                     {"kernel", s.kernel},
                     {"variants", s.variants},
                     {"backends", s.backends},
                     {"seeds", s.seeds},
                     {"cases", cases}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << dir.string() << ":\n";
    Table table({"file", "kernel", "cases", "bench cases", "variants", "backends", "seeds"});
    for (const Scenario& s : scenarios) {
      size_t bench = 0;
      for (const ScenarioCase& c : s.cases) bench += c.bench;
      std::vector<std::string> seeds;
      for (uint64_t seed : s.seeds) seeds.push_back(std::to_string(seed));
      table.add({printable_path(std::filesystem::path(s.path).filename()), printable(s.kernel),
                 std::to_string(s.cases.size()), std::to_string(bench),
                 s.variants.empty() ? "all" : join(s.variants, ","),
                 s.backends.empty() ? "all" : join(s.backends, ","), join(seeds, ",")});
    }
    table.print(std::cout);
  }
  for (const std::string& e : errors) std::cerr << "lab: " << e << "\n";
  if (!errors.empty()) state.exit_code = 2;
}

}  // namespace

void add_scenario_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("scenario", "Run or list scenario files (TOML under scenarios/)");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  lab scenario list\n"
      "  lab scenario run scenarios/*.toml                  # every case, variant, backend and seed\n"
      "  lab scenario run scenarios/detect_decode.toml --backend cpu --json\n");
  auto o = std::make_shared<ScenarioRunOptions>();
  auto* run =
      cmd->add_subcommand("run", "Run every case x variant x backend x seed of the files; summary table");
  run->add_option("FILE", o->files, "Scenario files")->required()->check(CLI::ExistingFile);
  run->add_option("--backend", o->backend, "Only this backend: cuda or cpu (default: every available one)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  run->add_flag("--json", o->json, "Machine-readable output");
  run->add_flag("--no-bench-cases", o->no_bench_cases,
                "Leave out the cases marked bench = true (large shapes kept for `lab bench`, whose float64 "
                "checks can take minutes)");
  run->footer(
      "Examples:\n"
      "  lab scenario run scenarios/*.toml\n"
      "  lab scenario run scenarios/detect_decode.toml --backend cpu --json\n"
      "  lab scenario run scenarios/nn_conv2d_patch.toml --backend cuda --no-bench-cases\n");
  run->callback([&state, o] { run_files(*o, state); });

  auto json = std::make_shared<bool>(false);
  auto* list = cmd->add_subcommand("list", "List the scenario files of the scenarios directory");
  list->add_flag("--json", *json, "Machine-readable output");
  list->callback([&state, json] { list_files(*json, state); });
}

}  // namespace lab
