// Compiles many modules side by side (NVRTC and the host compiler are both safe to run on several threads),
// so a network's cold start costs its slowest module rather than the sum of all of them.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"

namespace lab {

// Told after each module of a parallel compile finishes: modules done, total, its source path.
using CompileProgress = std::function<void(size_t done, size_t total, const std::string& source_path)>;
// Process-wide (the `lab` command installs a progress line on a terminal); empty = silent.
void set_compile_progress(CompileProgress progress);

// Runs `compile_one` for every request, at most one thread per hardware thread, and tells the progress hook
// after each, unless `verbose` (then each compile writes its own --verbose line, which stands in for the
// progress line). Rethrows the first failure (in request order) after every compile has finished.
void compile_in_parallel(const std::vector<CompileRequest>& requests,
                         const std::function<CompileResult(const CompileRequest&)>& compile_one, bool verbose);

}  // namespace lab
