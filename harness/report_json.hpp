// Run reports as JSON, both ways: the per-output checks, one kernel run (`lab run --json` writes it; the
// viewer's child run writes it and the viewer reads it back) and the scenario summary (`lab scenario run
// --json`, `lab demo --json`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/scenario_runner.hpp"
#include "kernels/compare.hpp"

namespace lab {

// One kernel run and its checks. The output and reference arrays of the checks are not part of the JSON.
struct KernelReport {
  std::string kernel, variant, backend, device;
  Params params;  // resolved
  uint64_t seed = 1;
  double time_ms = 0;
  bool pass = false;
  std::vector<OutputCheck> checks;
};

KernelReport kernel_report(const RunResult& result, const std::string& device);
nlohmann::json kernel_report_json(const KernelReport& report);
// Throws nlohmann::json::exception for a missing key or a value of the wrong type.
KernelReport kernel_report_from_json(const nlohmann::json& j);

nlohmann::json checks_json(const std::vector<OutputCheck>& checks);
std::vector<OutputCheck> checks_from_json(const nlohmann::json& j);
nlohmann::json params_json(const Params& params);

// One object per run: scenario, line, kernel, case, variant, backend, seed, params, pass, outputs, and
// time_ms or error.
nlohmann::json summary_json(const std::vector<RunResult>& results);

}  // namespace lab
