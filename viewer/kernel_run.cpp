// The child-process kernel run: its arguments, its result file in both directions.
#include "viewer/kernel_run.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "harness/context.hpp"
#include "harness/report_json.hpp"
#include "harness/scenario_runner.hpp"
#include "pipeline/safetensors.hpp"
#include "viewer/child_process.hpp"

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

// The output and reference arrays the result file holds for the heatmaps (not for outputs above
// kMaxHeatmapElements).
void attach_arrays(std::vector<OutputCheck>& checks, const SafetensorsFile& file) {
  for (OutputCheck& c : checks)
    if (file.contains(c.output + ".out") && file.contains(c.output + ".ref")) {
      c.out = file.floats(c.output + ".out");
      c.ref = file.floats(c.output + ".ref");
    }
}

}  // namespace

int run_child_main(const RunRequest& request, const std::string& result_file) {
  json summary = {{"kernel", request.kernel}};
  try {
    ContextOptions options;
    options.kernels_dir = request.kernels_dir;
    options.cache_dir = request.cache_dir;
    PlannedRun run = plan_single_run(request.kernel, request.variant, request.params, request.backend,
                                     request.seed, "viewer");
    run.tolerance = request.tolerance;
    const std::unique_ptr<Backend> backend = make_backend(run.backend, options.context());
    const RunResult result = run_once(run, *backend);
    summary = kernel_report_json(kernel_report(result, backend->device().name));
    summary["ran"] = true;
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
      KernelReport report = kernel_report_from_json(summary);
      outcome.pass = report.pass;
      outcome.time_ms = report.time_ms;
      outcome.device = report.device;
      outcome.checks = std::move(report.checks);
      attach_arrays(outcome.checks, file);
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
