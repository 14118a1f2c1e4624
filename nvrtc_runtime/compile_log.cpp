// The --verbose sink and the one-line compile record.
#include "nvrtc_runtime/compile_log.hpp"

#include <cstdio>
#include <mutex>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {
namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

std::function<void(const std::string&)>& sink() {
  static std::function<void(const std::string&)> s;
  return s;
}

}  // namespace

void set_verbose_sink(std::function<void(const std::string& line)> s) {
  std::lock_guard lock(sink_mutex());
  sink() = std::move(s);
}

void verbose_line(const std::string& line) {
  std::lock_guard lock(sink_mutex());
  if (sink()) return sink()(line);
  std::fprintf(stderr, "lab: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string nvrtc_command_line(const CompileRequest& request, const std::string& arch) {
  std::string line = "nvrtc";
  for (const std::string& option : nvrtc_options(request, arch)) line += " " + option;
  return line;
}

std::string compile_line(const CompileRequest& request, const CompileResult& result, double elapsed_ms,
                         const std::string& command) {
  char time[32];
  std::snprintf(time, sizeof time, "%.1f ms", elapsed_ms);
  const size_t kernels = request.name_expressions.size();
  return "compile " + result.backend + " " + result.target + " " + request.source_path + " (" +
         std::to_string(kernels) + (kernels == 1 ? " kernel" : " kernels") + "): " +
         (result.cache_hit ? "cache hit, " : "cache miss, ") + time + ": " + command;
}

void log_compile(const RuntimeOptions& options, const CompileRequest& request, const CompileResult& result,
                 const std::string& command, std::chrono::steady_clock::time_point started,
                 const std::string& note) {
  if (!options.verbose) return;
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!note.empty()) verbose_line(note);
  verbose_line(compile_line(request, result, elapsed_ms, command));
}

}  // namespace lab
