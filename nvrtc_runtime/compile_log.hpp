// The --verbose log: one line per compile (module, target, cache hit or miss, time, the compile command) and
// the cache notes, written to stderr (or a sink a caller installs) under a lock, so concurrent compiles
// never interleave their lines.
#pragma once
#include <chrono>
#include <functional>
#include <string>

#include "nvrtc_runtime/compile_types.hpp"

namespace lab {

struct RuntimeOptions;

// Where verbose lines go; the default writes "lab: LINE\n" to stderr. An empty function restores it.
void set_verbose_sink(std::function<void(const std::string& line)> sink);

// Hands `line` to the sink (thread-safe).
void verbose_line(const std::string& line);

// "nvrtc OPTION...": the NVRTC compile of `request` for `arch` ("sm_90").
std::string nvrtc_command_line(const CompileRequest& request, const std::string& arch);

// "compile cuda sm_90 detect/detect_decode.cu (2 kernels): cache miss, 812.4 ms: nvrtc --std=c++17 ..."
std::string compile_line(const CompileRequest& request, const CompileResult& result, double elapsed_ms,
                         const std::string& command);

// With options.verbose: the cache note (when not empty), then the compile line, timed from `started` (the
// cache lookup for a hit, the whole compile for a miss).
void log_compile(const RuntimeOptions& options, const CompileRequest& request, const CompileResult& result,
                 const std::string& command, std::chrono::steady_clock::time_point started,
                 const std::string& note);

}  // namespace lab
