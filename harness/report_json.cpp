// Run reports to and from JSON.
#include "harness/report_json.hpp"

namespace lab {

using nlohmann::json;

KernelReport kernel_report(const RunResult& result, const std::string& device) {
  const PlannedRun& run = result.run;
  return KernelReport{run.runner->name(), run.variant, run.backend, device,        run.params,
                      run.seed,           result.time_ms, result.pass, result.checks};
}

json kernel_report_json(const KernelReport& r) {
  return {{"kernel", r.kernel},   {"variant", r.variant},
          {"backend", r.backend}, {"device", r.device},
          {"params", params_json(r.params)},
          {"seed", r.seed},       {"time_ms", r.time_ms},
          {"pass", r.pass},       {"outputs", checks_json(r.checks)}};
}

KernelReport kernel_report_from_json(const json& j) {
  KernelReport r;
  r.kernel = j.at("kernel").get<std::string>();
  r.variant = j.at("variant").get<std::string>();
  r.backend = j.at("backend").get<std::string>();
  r.device = j.at("device").get<std::string>();
  r.params = j.at("params").get<Params>();
  r.seed = j.at("seed").get<uint64_t>();
  r.time_ms = j.at("time_ms").get<double>();
  r.pass = j.at("pass").get<bool>();
  r.checks = checks_from_json(j.at("outputs"));
  return r;
}

json checks_json(const std::vector<OutputCheck>& checks) {
  json out = json::array();
  for (const OutputCheck& c : checks) {
    const Metrics& m = c.metrics;
    out.push_back({{"output", c.output},
                   {"shape", c.shape},
                   {"max_abs", m.max_abs},
                   {"max_rel", m.max_rel},
                   {"rel_l2", m.rel_l2},
                   {"worst_index", m.worst_index},
                   {"worst_out", m.worst_out},
                   {"worst_ref", m.worst_ref},
                   {"count", m.count},
                   {"non_finite", m.non_finite},
                   {"tolerance", {{"rel_l2", c.tolerance.rel_l2}, {"max_abs", c.tolerance.max_abs}}},
                   {"pass", c.pass}});
  }
  return out;
}

std::vector<OutputCheck> checks_from_json(const json& j) {
  std::vector<OutputCheck> checks;
  for (const json& o : j) {
    OutputCheck c;
    c.output = o.at("output").get<std::string>();
    c.shape = o.at("shape").get<std::vector<size_t>>();
    c.metrics.max_abs = o.at("max_abs").get<double>();
    c.metrics.max_rel = o.at("max_rel").get<double>();
    c.metrics.rel_l2 = o.at("rel_l2").get<double>();
    c.metrics.worst_index = o.at("worst_index").get<size_t>();
    c.metrics.worst_out = o.at("worst_out").get<double>();
    c.metrics.worst_ref = o.at("worst_ref").get<double>();
    c.metrics.count = o.at("count").get<size_t>();
    c.metrics.non_finite = o.at("non_finite").get<size_t>();
    c.tolerance.rel_l2 = o.at("tolerance").at("rel_l2").get<double>();
    c.tolerance.max_abs = o.at("tolerance").at("max_abs").get<double>();
    c.pass = o.at("pass").get<bool>();
    checks.push_back(std::move(c));
  }
  return checks;
}

json params_json(const Params& params) {
  json out = json::object();
  for (const auto& [k, v] : params) out[k] = v;
  return out;
}

json summary_json(const std::vector<RunResult>& results) {
  json out = json::array();
  for (const RunResult& r : results) {
    json row = {{"scenario", r.run.scenario_path},
                {"line", r.run.case_line},
                {"kernel", r.run.runner->name()},
                {"case", r.run.case_name},
                {"variant", r.run.variant},
                {"backend", r.run.backend},
                {"seed", r.run.seed},
                {"params", params_json(r.run.params)},
                {"pass", r.pass},
                {"outputs", checks_json(r.checks)}};
    if (r.error.empty())
      row["time_ms"] = r.time_ms;
    else
      row["error"] = r.error;
    out.push_back(row);
  }
  return out;
}

}  // namespace lab
