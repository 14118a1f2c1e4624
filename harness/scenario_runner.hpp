// Expanding a scenario into runs (case x variant x backend x seed, every name and parameter validated first)
// and executing one run: instantiate, launch, time, check.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nvrtc_runtime/runtime_context.hpp"
#include "kernels/runner.hpp"
#include "harness/scenario.hpp"

namespace lab {

// Backends made on first use and kept for the whole session, so compiled modules are reused.
class BackendSet {
 public:
  explicit BackendSet(RuntimeContext context) : context_(std::move(context)) {}
  Backend& get(const std::string& name);  // UsageError for an unknown name or cuda without a device
  const RuntimeContext& context() const { return context_; }

 private:
  RuntimeContext context_;
  std::map<std::string, std::unique_ptr<Backend>> backends_;
};

struct PlannedRun {
  const Runner* runner = nullptr;
  std::string scenario_path;
  std::string case_name;
  int case_line = 0;
  std::string variant;
  std::string backend;
  uint64_t seed = 1;
  Params params;  // resolved
  std::optional<Tolerance> tolerance;
  bool bench = false;
};

// One run named by the user (`lab run`, the viewer's Run panel): the runner by name, its variant ("" = the
// first) and `params` resolved against it. Throws UsageError.
PlannedRun plan_single_run(const std::string& kernel, const std::string& variant, const Params& params,
                           const std::string& backend, uint64_t seed, const std::string& case_name);

struct ScenarioPlan {
  std::vector<PlannedRun> runs;
  std::vector<std::string> skipped;  // one line per (file, backend) that is not available here
};

// Resolves the runner, variants and parameters of every case (UsageError "file:line: ..." for a bad name or
// value) and expands the runs. `only_backend` non-empty keeps just that backend; backends listed but not
// available on this machine are reported in `skipped`.
ScenarioPlan plan_scenario(const Scenario& scenario, const std::string& only_backend);

struct RunResult {
  PlannedRun run;
  std::vector<OutputCheck> checks;
  double time_ms = 0;
  bool pass = false;
  std::string error;  // a compile or runtime failure, formatted; empty when the kernel ran

  double worst_rel_l2() const;
  double worst_max_abs() const;
};

// Instantiates, launches once (after an untimed warm-up launch on a backend with device timing), times and
// checks. Throws CompileError and RuntimeError.
RunResult run_once(const PlannedRun& run, Backend& backend);
// run_once on the run's backend, with compile errors, runtime failures and allocations that fail (host
// memory) turned into a failed result that carries the message.
RunResult execute_run(const PlannedRun& run, BackendSet& backends);

struct BatchResult {
  std::vector<RunResult> results;
  std::vector<std::string> skipped;
};

// Loads and plans every file first (so a bad file stops everything before any run), then executes every run,
// reporting progress on a terminal; with skip_bench_cases, the cases marked bench = true are left out (each
// file's count of them in `skipped`).
BatchResult run_scenario_files(const std::vector<std::string>& files, const std::string& only_backend,
                               BackendSet& backends, bool show_progress, bool skip_bench_cases = false);

}  // namespace lab
