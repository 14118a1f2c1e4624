// Compiler-log parsing (NVRTC's `file(line): error: msg` and gcc/clang's `file:line:col: error: msg`) and the
// `file:line:col: error: message` + source-line formatting used by the CLI, tests and the viewer.
#pragma once
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"

namespace lab {

// Parses every diagnostic in `log`. `strip_prefix` (e.g. a materialised tree directory + "/") is removed from
// file paths so they name the tree-relative file. NVRTC's caret line, when present, gives the column.
std::vector<Diagnostic> parse_compiler_log(const std::string& log, const std::string& strip_prefix = "");

// One diagnostic per block: "file:line:col: severity: message", then the source line and a caret when
// `tree` can read the file.
std::string format_diagnostics(const std::vector<Diagnostic>& diags, const KernelTree* tree);

// True when any diagnostic is an error.
bool has_errors(const std::vector<Diagnostic>& diags);

}  // namespace lab
