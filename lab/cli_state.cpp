// The global options of the `lab` command.
#include "lab/cli_state.hpp"

namespace lab {

void add_global_options(CLI::App& app, CliState& state) {
  app.add_option("--kernels-dir", state.kernels_dir,
                 "Editable kernel source tree to compile from (default: $LAB_KERNELS_DIR, else the sources "
                 "embedded in this binary)");
  app.add_option("--cache-dir", state.cache_dir,
                 "Compile cache directory (default: $LAB_CACHE_DIR, else $XDG_CACHE_HOME/yolo26-lab)");
  app.add_option("--scenarios-dir", state.scenarios_dir,
                 "Scenario directory for list, bench and demo (default: $LAB_SCENARIOS_DIR, else the "
                 "checkout's scenarios/)");
  app.add_option("--arch", state.arch, "Compile target, e.g. sm_90 (default: the live GPU's, else sm_90)");
  app.add_flag("-v,--verbose", state.verbose, "Print cache notes and compile commands to stderr");
  app.add_flag("--check-bounds", state.check_bounds, "cpu backend: guard pages around every buffer");
  app.add_option("--timeout", state.timeout,
                 "cpu backend: fail a launch whose kernel thread runs this many seconds of CPU time without "
                 "exiting or reaching a barrier (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--no-pdl", state.no_pdl,
               "cuda backend: launch the NHWC network's kernels without Programmatic Dependent Launch "
               "(for A/B timing; the results are the same)");
}

}  // namespace lab
