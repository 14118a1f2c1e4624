// Scenario expansion and execution.
#include "harness/scenario_runner.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>

#include "nvrtc_runtime/errors.hpp"
#include "harness/progress.hpp"

namespace lab {

Backend& BackendSet::get(const std::string& name) {
  auto it = backends_.find(name);
  if (it == backends_.end()) it = backends_.emplace(name, make_backend(name, context_)).first;
  return *it->second;
}

namespace {

std::string at(const Scenario& s, int line) {
  return s.path + ":" + std::to_string(line) + ": ";
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

PlannedRun plan_single_run(const std::string& kernel, const std::string& variant, const Params& params,
                           const std::string& backend, uint64_t seed, const std::string& case_name) {
  PlannedRun run;
  run.runner = &Registry::instance().get(kernel);
  run.variant = resolve_variant(*run.runner, variant);
  run.params = resolve_params(*run.runner, params);
  run.backend = backend;
  run.seed = seed;
  run.case_name = case_name;
  return run;
}

ScenarioPlan plan_scenario(const Scenario& scenario, const std::string& only_backend) {
  const Runner* runner = nullptr;
  try {
    runner = &Registry::instance().get(scenario.kernel);
  } catch (const UsageError& e) {
    throw UsageError(at(scenario, scenario.kernel_line) + e.what());
  }
  std::vector<std::string> variants;
  try {
    if (scenario.variants.empty())
      for (const KernelVariant& v : runner->variants()) variants.push_back(v.name);
    else
      for (const std::string& v : scenario.variants) variants.push_back(resolve_variant(*runner, v));
  } catch (const UsageError& e) {
    throw UsageError(at(scenario, scenario.variants_line) + e.what());
  }

  const std::vector<std::string> present = available_backends();
  std::map<std::string, size_t> unavailable;  // backend -> runs skipped
  ScenarioPlan plan;
  for (const ScenarioCase& c : scenario.cases) {
    Params params;
    try {
      params = resolve_params(*runner, c.params);
    } catch (const UsageError& e) {
      throw UsageError(at(scenario, c.line) + "case '" + c.name + "': " + e.what());
    }
    std::vector<std::string> backends = !c.backends.empty() ? c.backends
                                        : !scenario.backends.empty()
                                            ? scenario.backends
                                            : std::vector<std::string>{"cpu", "cuda"};
    for (const std::string& backend : backends) {
      if (!only_backend.empty() && backend != only_backend) continue;
      if (!contains(present, backend)) {
        unavailable[backend] += variants.size() * scenario.seeds.size();
        continue;
      }
      for (const std::string& variant : variants) {
        // Without a `variants` key a case runs every variant that can run it; a variant whose rule refuses
        // the case's parameters (e.g. wgmma at HEAD_DIM 32) is skipped and said so. A listed one is an error.
        if (scenario.variants.empty()) {
          const std::string refusal = variant_refusal(runner->spec(), variant, params);
          if (!refusal.empty()) {
            plan.skipped.push_back(at(scenario, c.line) + "case '" + c.name + "', variant " + variant +
                                   " on " + backend + " skipped: " + refusal);
            continue;
          }
        }
        for (uint64_t seed : scenario.seeds)
          plan.runs.push_back(PlannedRun{runner, scenario.path, c.name, c.line, variant, backend, seed,
                                         params, c.tolerance, c.bench});
      }
    }
  }
  for (const auto& [backend, count] : unavailable)
    plan.skipped.push_back(
        scenario.path + ": " + std::to_string(count) + " run(s) on " + backend +
        " skipped: " + (backend == "cuda" ? "no CUDA device is available" : "backend not available"));
  return plan;
}

double RunResult::worst_rel_l2() const {
  double worst = 0;
  for (const OutputCheck& c : checks) worst = std::max(worst, c.metrics.rel_l2);
  return worst;
}

double RunResult::worst_max_abs() const {
  double worst = 0;
  for (const OutputCheck& c : checks) worst = std::max(worst, c.metrics.max_abs);
  return worst;
}

RunResult run_once(const PlannedRun& run, Backend& backend) {
  RunResult result;
  result.run = run;
  std::unique_ptr<Instance> instance = run.runner->instantiate(backend, run.variant, run.params, run.seed);
  if (backend.has_device_timing()) {
    instance->launch();
    backend.synchronize();
    instance->poison();
  }
  result.time_ms = backend.time_ms([&] { instance->launch(); });
  result.checks = instance->check(run.tolerance);
  result.pass = !result.checks.empty() &&
                std::all_of(result.checks.begin(), result.checks.end(), [](const auto& c) { return c.pass; });
  return result;
}

RunResult execute_run(const PlannedRun& run, BackendSet& backends) {
  try {
    return run_once(run, backends.get(run.backend));
  } catch (const CompileError& e) {
    return RunResult{run, {}, 0, false, e.what()};
  } catch (const RuntimeError& e) {
    return RunResult{run, {}, 0, false, e.what()};
  } catch (const std::bad_alloc&) {
    // Parameters in range can still need more memory than there is: this case fails, the others run.
    return RunResult{run, {}, 0, false, "out of memory: the case's buffers do not fit in host memory"};
  } catch (const std::length_error&) {
    return RunResult{run, {}, 0, false, "out of memory: the case's buffers exceed the largest allocation"};
  }
}

BatchResult run_scenario_files(const std::vector<std::string>& files, const std::string& only_backend,
                               BackendSet& backends, bool show_progress, bool skip_bench_cases) {
  BatchResult batch;
  std::vector<PlannedRun> runs;
  std::vector<Scenario> scenarios;
  for (const std::string& file : files) scenarios.push_back(load_scenario(file));
  for (Scenario& scenario : scenarios) {
    if (skip_bench_cases) {
      const size_t bench = std::erase_if(scenario.cases, [](const ScenarioCase& c) { return c.bench; });
      if (bench > 0)
        batch.skipped.push_back(scenario.path + ": " + std::to_string(bench) +
                                " bench case(s) not run (--no-bench-cases)");
    }
    ScenarioPlan plan = plan_scenario(scenario, only_backend);
    runs.insert(runs.end(), plan.runs.begin(), plan.runs.end());
    batch.skipped.insert(batch.skipped.end(), plan.skipped.begin(), plan.skipped.end());
  }
  Progress progress(show_progress);
  for (size_t i = 0; i < runs.size(); ++i) {
    const PlannedRun& r = runs[i];
    progress.update(i, runs.size(),
                    r.runner->name() + " / " + r.case_name + " / " + r.variant + " / " + r.backend +
                        " / seed " + std::to_string(r.seed));
    batch.results.push_back(execute_run(r, backends));
  }
  return batch;
}

}  // namespace lab
