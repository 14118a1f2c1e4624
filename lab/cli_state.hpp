// The global options every verb shares (--kernels-dir, --cache-dir, --arch, --verbose, --check-bounds,
// --timeout, --no-pdl, --scenarios-dir: the harness's ContextOptions) and the exit status the verbs report.
#pragma once
#include <CLI/CLI.hpp>

#include "harness/context.hpp"
#include "harness/param_args.hpp"
#include "kernels/runner.hpp"

namespace lab {

struct CliState : ContextOptions {
  int exit_code = 0;  // a verb sets 1 when a check fails; errors are exceptions
};

// Registers the global options on the top-level app (they are accepted before or after the verb).
void add_global_options(CLI::App& app, CliState& state);

}  // namespace lab
