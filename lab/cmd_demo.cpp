// `lab demo` (what `make demo` runs): compile every variant of every runner with the cuda backend's compiler
// (NVRTC, no GPU needed) into one resource table, then run every scenario on every available backend with the
// summary table. Exit 1 when a compile or a check fails.
#include <iostream>
#include <map>

#include "lab/commands.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "harness/progress.hpp"
#include "lab/report.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "lab/resource_table.hpp"
#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

// Returns the number of compile failures, whose diagnostics are printed after the table.
size_t compile_everything(BackendSet& backends, const std::string& arch) {
  struct Job {
    const Runner* runner;
    std::string variant;
    bool is_default;
  };
  std::vector<Job> jobs;
  for (const Runner* r : Registry::instance().all()) {
    const auto variants = r->variants();
    for (size_t i = 0; i < variants.size(); ++i) jobs.push_back({r, variants[i].name, i == 0});
  }
  std::cout << "== compiling " << jobs.size() << " kernel variants of " << Registry::instance().all().size()
            << " runners with NVRTC " << nvrtc_version() << " for " << arch
            << " (default parameters; * = default variant)\n\n";
  std::vector<ResourceReport> reports;
  std::vector<std::string> failures;
  std::map<std::string, std::string> label_of_key;  // a module several runners share is listed once
  std::vector<std::string> shared;
  {
    Progress progress(true);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& job = jobs[i];
      const std::string label = job.runner->name() + " / " + job.variant + (job.is_default ? " *" : "");
      progress.update(i, jobs.size(), "compiling " + label);
      try {
        const CompileRequest request =
            job.runner->compile_request(job.variant, resolve_params(*job.runner, {}));
        ResourceReport report = compile_resources(backends, request, arch);
        report.label = label;
        const auto [it, first] = label_of_key.emplace(report.result.cache_key, label);
        if (first)
          reports.push_back(std::move(report));
        else
          shared.push_back(label + " compiles the same module as " + it->second);
      } catch (const CompileError& e) {
        failures.push_back(label + ":\n" + e.what());
      } catch (const UsageError& e) {
        // A variant that needs other parameters (conv2d's v3_depthwise needs a depthwise shape): its kernels
        // are compiled with the runner's other variants; the scenarios run it at valid shapes.
        shared.push_back(label + " needs other parameters than the defaults (" + e.what() + ")");
      }
    }
  }
  print_resources(std::cout, reports);
  for (const std::string& line : shared) std::cout << "  " << line << "\n";
  for (const std::string& f : failures) std::cout << "\nCOMPILE ERROR " << f << "\n";
  return failures.size();
}

void demo(CliState& state) {
  BackendSet backends(state.context());
  const std::string arch = state.arch.empty() ? default_cuda_arch() : state.arch;
  const size_t compile_failures = compile_everything(backends, arch);

  std::vector<std::string> files;
  for (const auto& f : scenario_files(state.scenarios_directory())) files.push_back(f.string());
  const auto backends_here = available_backends();
  std::cout << "\n== running " << files.size() << " scenario files from "
            << state.scenarios_directory().string() << " on " << join(backends_here, ", ")
            << (cuda_device_present() ? "" : " (no CUDA device)") << "\n\n";
  const BatchResult batch = run_scenario_files(files, "", backends, true);
  for (const std::string& s : batch.skipped) std::cout << "note: " << s << "\n";
  print_summary(std::cout, batch.results);
  if (compile_failures > 0 || count_failed(batch.results) > 0) state.exit_code = 1;
}

}  // namespace

void add_demo_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand(
      "demo", "Compile every kernel (resource table), then run every scenario on every available backend");
  cmd->footer(
      "Examples:\n"
      "  lab demo\n"
      "  lab demo --kernels-dir my_kernels/      # the same over an edited copy of kernels/\n");
  cmd->callback([&state] { demo(state); });
}

}  // namespace lab
