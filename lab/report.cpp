// Check and summary tables as text.
#include "lab/report.hpp"

#include <algorithm>

#include "nvrtc_runtime/printable_text.hpp"
#include "lab/table.hpp"

namespace lab {

bool all_pass(const std::vector<OutputCheck>& checks) {
  return !checks.empty() && std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.pass; });
}

void print_checks(std::ostream& os, const std::vector<OutputCheck>& checks) {
  Table table({"output", "shape", "max_abs", "max_rel", "rel_l2", "worst [index] out / ref", "non-finite",
               "tolerance (rel_l2, max_abs)", "verdict"});
  for (const OutputCheck& c : checks) {
    const Metrics& m = c.metrics;
    table.add(
        {c.output, format_shape(c.shape), format_sci(m.max_abs), format_sci(m.max_rel), format_sci(m.rel_l2),
         "[" + std::to_string(m.worst_index) + "] " + format_sci(m.worst_out) + " / " +
             format_sci(m.worst_ref),
         std::to_string(m.non_finite) + " of " + std::to_string(m.count),
         format_sci(c.tolerance.rel_l2) + ", " + format_sci(c.tolerance.max_abs), c.pass ? "PASS" : "FAIL"});
  }
  table.print(os);
}

size_t count_failed(const std::vector<RunResult>& results) {
  return static_cast<size_t>(
      std::count_if(results.begin(), results.end(), [](const auto& r) { return !r.pass; }));
}

void print_summary(std::ostream& os, const std::vector<RunResult>& results) {
  Table table({"kernel", "case", "variant", "backend", "seed", "rel_l2", "max_abs", "time", "verdict"});
  for (const RunResult& r : results) {
    const bool ran = r.error.empty();
    table.add({r.run.runner->name(), printable(r.run.case_name), r.run.variant, r.run.backend,
               std::to_string(r.run.seed), ran ? format_sci(r.worst_rel_l2()) : "-",
               ran ? format_sci(r.worst_max_abs()) : "-", ran ? format_ms(r.time_ms) : "-",
               r.pass ? "PASS" : (ran ? "FAIL" : "ERROR")});
  }
  table.print(os);
  for (const RunResult& r : results) {
    if (r.pass) continue;
    os << "\n"
       << printable(r.run.scenario_path) << ":" << r.run.case_line << ": " << r.run.runner->name() << " / "
       << printable(r.run.case_name) << " / " << r.run.variant << " / " << r.run.backend << " / seed "
       << r.run.seed << ":\n";
    if (!r.error.empty())
      os << r.error << (r.error.back() == '\n' ? "" : "\n");
    else
      print_checks(os, r.checks);
  }
  const size_t failed = count_failed(results);
  os << "\n" << results.size() - failed << " passed, " << failed << " failed\n";
}

}  // namespace lab
