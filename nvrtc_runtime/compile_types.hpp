// The plain data a compile takes and yields: request, diagnostics, resource use, result.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

class KernelTree;

// What to compile: one .cu of the kernel tree, specialised by defines and name expressions.
struct CompileRequest {
  std::string source_path;                    // relative to the kernel tree, e.g. "detect/detect_decode.cu"
  std::vector<std::string> defines;           // "NAME" or "NAME=VALUE"
  std::vector<std::string> name_expressions;  // kernels to export, e.g. "flash_attn2_fwd_tiled<64>"
  // Uses instructions of the architecture-specific target (wgmma, setmaxnreg): NVRTC compiles for "sm_90a"
  // instead of "sm_90" on an sm_90 device. The cpu backend ignores it.
  bool arch_specific = false;
  bool operator==(const CompileRequest&) const = default;
};

struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string severity;  // "error", "warning", "note"
  std::string message;
};

// Per-kernel resource use; fields that a backend cannot know stay empty.
struct ResourceUsage {
  std::string kernel;  // name expression
  std::optional<int> registers;
  std::optional<int> static_shared_bytes;
  std::optional<int> local_bytes;  // stack frame
  std::optional<int> spill_stores;
  std::optional<int> spill_loads;
  std::optional<int> constant_bytes;
  std::optional<int> max_threads_per_block;
};

struct CompileResult {
  std::string backend;  // "cuda" or "cpu"
  std::string target;   // "sm_90", or the host compiler
  std::string log;      // full compiler log
  std::vector<Diagnostic> diagnostics;
  std::string ptx;              // cuda only
  std::vector<uint8_t> binary;  // cubin (cuda) or shared object (cpu)
  std::vector<std::string> name_expressions;
  std::vector<std::string> lowered_names;  // same order as name_expressions
  std::vector<ResourceUsage> resources;    // same order as name_expressions
  double compile_ms = 0;
  bool cache_hit = false;
  std::string cache_key;
};

// A compile that failed: carries the diagnostics and the formatted message (file:line:col: error: ...).
struct CompileError : std::runtime_error {
  CompileError(std::string formatted, std::vector<Diagnostic> diags, std::string log)
      : std::runtime_error(std::move(formatted)), diagnostics(std::move(diags)), log(std::move(log)) {}
  std::vector<Diagnostic> diagnostics;
  std::string log;
};

}  // namespace lab
