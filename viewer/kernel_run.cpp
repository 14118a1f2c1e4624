// The child-process kernel run: argv, spawn, wait with a timeout, result file in both directions.
#include "kernel_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lab/cli_state.hpp"
#include "lab/report.hpp"
#include "lab/scenario_runner.hpp"
#include "pipeline/safetensors.hpp"

extern char** environ;

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

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last few lines of a log, to keep the failure paragraph short.
std::string tail_lines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  size_t start = pos;
  for (size_t seen = 0; start > 0; --start)
    if (text[start - 1] == '\n' && ++seen == lines) break;
  return text.substr(start, pos - start);
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
  std::error_code ec;
  char dir_template[] = "/tmp/lab-viewer-run-XXXXXX";
  if (!mkdtemp(dir_template)) {
    outcome.failure = std::string("cannot make a temporary folder: ") + std::strerror(errno);
    return outcome;
  }
  const fs::path dir = dir_template;
  const std::string result_file = (dir / "result.safetensors").string();
  const std::string log_file = (dir / "child.log").string();
  const std::vector<std::string> args = child_argv(request, result_file);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // own group: a timeout kills the whole child
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawn_error != 0) {
    outcome.failure = std::string("cannot start the run process: ") + std::strerror(spawn_error);
    fs::remove_all(dir, ec);
    return outcome;
  }

  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > request.timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string log = tail_lines(read_text(log_file), 12);
  const std::string who = "kernel " + request.kernel +
                          (request.variant.empty() ? "" : " / " + request.variant) + " on " + request.backend;
  if (timed_out) {
    outcome.failure = who + ": no result after " + std::to_string(static_cast<int>(request.timeout_s)) +
                      " s (hang or deadlock); the run process was killed" + (log.empty() ? "" : "\n" + log);
  } else if (WIFSIGNALED(status)) {
    outcome.failure = who + ": the run process died with " + signal_text(WTERMSIG(status)) +
                      " (a fault in the kernel or the emulator)" + (log.empty() ? "" : "\n" + log);
  } else if (!fs::exists(result_file, ec)) {
    outcome.failure = who + ": the run process exited with status " + std::to_string(WEXITSTATUS(status)) +
                      " and no result" + (log.empty() ? "" : "\n" + log);
  } else {
    try {
      const SafetensorsFile file = SafetensorsFile::load(result_file);
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
  }
  fs::remove_all(dir, ec);
  return outcome;
}

}  // namespace lab::viewer
