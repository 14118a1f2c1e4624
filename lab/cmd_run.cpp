// `lab run KERNEL`: build, launch once, check every output against the CPU reference; exit 1 on mismatch.
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "lab/option_checks.hpp"
#include "harness/report_json.hpp"
#include "lab/report.hpp"
#include "harness/scenario_runner.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

struct RunOptions {
  std::string kernel, variant, backend;
  std::vector<std::string> params;
  uint64_t seed = 1;
  bool json = false;
};

std::string params_text(const Params& params) {
  std::vector<std::string> items;
  for (const auto& [k, v] : params) items.push_back(k + "=" + v);
  return join(items, " ");
}

void run_kernel(const RunOptions& o, CliState& state) {
  const Params params = parse_param_args(o.params);
  const PlannedRun run = plan_single_run(o.kernel, o.variant, params,
                                         o.backend.empty() ? default_backend_name() : o.backend, o.seed,
                                         "command line");
  const std::unique_ptr<Backend> backend_owner = make_backend(run.backend, state.context());
  Backend& backend = *backend_owner;
  const RunResult result = run_once(run, backend);
  if (!result.pass) state.exit_code = 1;

  if (o.json) {
    std::cout << kernel_report_json(kernel_report(result, backend.device().name)).dump(2) << "\n";
    return;
  }
  std::cout << run.runner->name() << " / " << run.variant << " on " << run.backend << " ("
            << backend.device().name << "), seed " << run.seed << "\nparams: " << params_text(run.params)
            << "\n\n";
  print_checks(std::cout, result.checks);
  std::cout << "\ntime: " << format_ms(result.time_ms) << " (one launch"
            << (backend.has_device_timing() ? ", after a warm-up launch" : "") << ")\n"
            << (result.pass ? "PASS" : "FAIL (seed " + std::to_string(run.seed) + ")") << "\n";
}

}  // namespace

void add_run_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("run", "Run one kernel and check every output against its CPU reference");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("KERNEL", o->kernel, "Runner name (see `lab list`)")->required();
  cmd->add_option("--variant", o->variant, "Variant (default: the runner's first)");
  cmd->add_option("--backend", o->backend, "cuda or cpu (default: cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--param", o->params, "Parameter NAME=VALUE (repeatable)");
  cmd->add_option("--seed", o->seed, "Seed of the random inputs")->check(at_least(0))->capture_default_str();
  cmd->add_flag("--check-bounds", state.check_bounds, "cpu backend: guard pages around every buffer");
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  lab run detect_decode                                  # cuda if present, else cpu\n"
      "  lab run flash_attn2_fwd --backend cpu --param HEAD_DIM=32 --seed 3\n"
      "  lab run conv2d --variant v2_tiled --json\n");
  cmd->callback([&state, o] { run_kernel(*o, state); });
}

}  // namespace lab
