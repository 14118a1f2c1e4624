// Shared output of checks and run results: the per-output check table (`lab run`) and the scenario summary
// table (`lab scenario run`, `lab demo`); harness/report_json.hpp has their JSON forms.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "kernels/compare.hpp"
#include "harness/scenario_runner.hpp"

namespace lab {

bool all_pass(const std::vector<OutputCheck>& checks);

// One row per output: shape, max abs, max rel, rel L2, worst index with out/ref, non-finite, tolerance,
// verdict.
void print_checks(std::ostream& os, const std::vector<OutputCheck>& checks);

// One row per run: kernel, case, variant, backend, seed, rel_l2, max_abs, time, PASS/FAIL; then the errors
// and the failing outputs in detail, then a count line.
void print_summary(std::ostream& os, const std::vector<RunResult>& results);
size_t count_failed(const std::vector<RunResult>& results);

}  // namespace lab
