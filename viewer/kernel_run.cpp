// The child-process kernel run: its arguments, its result file in both directions.
#include "viewer/kernel_run.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "viewer/child_process.hpp"
#include "lab/cli_state.hpp"
#include "lab/report.hpp"
#include "lab/scenario_runner.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Outputs above this many elements keep metrics only (the heatmap of such outputs is not shown).
constexpr size_t kMaxHeatmapElements = size_t{1} << 24;

json diagnostics_json(const std::vector<Diagnostic>& diags) {
  json out = json::array();
  for (const Diagnostic& d : diags)
    out.push_back({{"file", d.file},
                   {"line", d.line},
                   {"column", d.column},
                   {"severity", d.severity},
                   {"message", d.message}});
  return out;
}

std::vector<Diagnostic> diagnostics_from_json(const json& j) {
  std::vector<Diagnostic> out;
  for (const json& d : j)
    out.push_back({d.at("file").get<std::string>(), d.at("line").get<int>(), d.at("column").get<int>(),
                   d.at("severity").get<std::string>(), d.at("message").get<std::string>()});
  return out;
}

void write_result(const std::string& file, const json& summary, const std::vector<OutputCheck>& checks) {
  std::vector<SafetensorsTensor> tensors;
  for (const OutputCheck& c : checks) {
    if (c.out.empty() || c.out.size() != c.ref.size() || c.out.size() > kMaxHeatmapElements) continue;
    const std::vector<int64_t> shape{static_cast<int64_t>(c.out.size())};
    tensors.push_back(f32_tensor(c.output + ".out", shape, c.out));
    tensors.push_back(f32_tensor(c.output + ".ref", shape, c.ref));
  }
  write_safetensors(file, tensors, {{"result", summary.dump()}});
}

std::string exact_text(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::vector<std::string> child_argv(const RunRequest& r, const std::string& result_file) {
  std::vector<std::string> argv{"/proc/self/exe", "--run-child", r.kernel, "--result-file",       result_file,
                                "--backend",      r.backend,     "--seed", std::to_string(r.seed)};
  if (!r.variant.empty()) argv.insert(argv.end(), {"--variant", r.variant});
  if (!r.kernels_dir.empty()) argv.insert(argv.end(), {"--kernels-dir", r.kernels_dir});
  if (!r.cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", r.cache_dir});
  for (const auto& [k, v] : r.params) argv.insert(argv.end(), {"--param", k + "=" + v});
  if (r.tolerance)
    argv.insert(argv.end(),
                {"--rel-l2", exact_text(r.tolerance->rel_l2), "--max-abs", exact_text(r.tolerance->max_abs)});
  return argv;
}

std::vector<OutputCheck> checks_from(const json& outputs, const SafetensorsFile& file) {
  std::vector<OutputCheck> checks;
  for (const json& o : outputs) {
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
    if (file.contains(c.output + ".out") && file.contains(c.output + ".ref")) {
      c.out = file.floats(c.output + ".out");
      c.ref = file.floats(c.output + ".ref");
    }
    checks.push_back(std::move(c));
  }
  return checks;
}

}  // namespace

int run_child_main(const RunRequest& request, const std::string& result_file) {
  json summary = {{"kernel", request.kernel}};
  try {
    CliState state;
    state.kernels_dir = request.kernels_dir;
    state.cache_dir = request.cache_dir;
    PlannedRun run;
    run.runner = &Registry::instance().get(request.kernel);
    run.variant = resolve_variant(*run.runner, request.variant);
    run.params = resolve_params(*run.runner, request.params);
    run.backend = request.backend;
    run.seed = request.seed;
    run.case_name = "viewer";
    run.tolerance = request.tolerance;
    const std::unique_ptr<Backend> backend = make_backend(run.backend, state.context());
    const RunResult result = run_once(run, *backend);
    summary["ran"] = true;
    summary["pass"] = result.pass;
    summary["time_ms"] = result.time_ms;
    summary["device"] = backend->device().name;
    summary["outputs"] = checks_json(result.checks);
    write_result(result_file, summary, result.checks);
    return 0;
  } catch (const CompileError& e) {
    summary["failure"] = std::string(e.what());
    summary["diagnostics"] = diagnostics_json(e.diagnostics);
  } catch (const std::exception& e) {
    summary["failure"] = std::string(e.what());
  }
  summary["ran"] = false;
  write_result(result_file, summary, {});
  return 1;
}

RunOutcome run_in_child(const RunRequest& request) {
  RunOutcome outcome;
  const std::string who = "kernel " + request.kernel +
                          (request.variant.empty() ? "" : " / " + request.variant) + " on " + request.backend;
  try {
    const TemporaryFolder dir("lab-viewer-run");
    const fs::path result_file = dir.path() / "result.safetensors";
    const ChildExit exit = run_child_process(child_argv(request, result_file.string()),
                                             dir.path() / "child.log", request.timeout_s);
    outcome.failure = child_failure(exit, who, request.timeout_s, fs::exists(result_file));
    if (!outcome.failure.empty()) return outcome;
    const SafetensorsFile file = SafetensorsFile::load(result_file.string());
    const json summary = json::parse(file.metadata().at("result"));
    outcome.ran = summary.value("ran", false);
    if (outcome.ran) {
      outcome.pass = summary.at("pass").get<bool>();
      outcome.time_ms = summary.at("time_ms").get<double>();
      outcome.device = summary.at("device").get<std::string>();
      outcome.checks = checks_from(summary.at("outputs"), file);
    } else {
      outcome.failure = who + ": " + summary.value("failure", std::string("failed"));
      if (summary.contains("diagnostics"))
        outcome.diagnostics = diagnostics_from_json(summary["diagnostics"]);
    }
  } catch (const std::exception& e) {
    outcome.failure = who + ": unreadable result from the run process: " + e.what();
  }
  return outcome;
}

}  // namespace lab::viewer
