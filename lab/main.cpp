// `lab`: wires the verbs and maps failures to exit codes: 2 for bad usage or input (one line "lab: ..."),
// 1 for compile errors (with diagnostics), runtime failures and failed checks.
#include <iostream>

#include "lab/commands.hpp"
#include "lab/verb_check.hpp"
#include "lab/version.hpp"
#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"

int main(int argc, char** argv) {
  lab::CliState state;
  CLI::App app{"YOLO26 Kernel Lab: compile, inspect, run, check and benchmark the YOLO26 CUDA kernels",
               "lab"};
  app.require_subcommand(1);
  app.fallthrough();
  lab::add_global_options(app, state);
  lab::add_list_command(app, state);
  lab::add_source_command(app, state);
  lab::add_run_command(app, state);
  lab::add_bench_command(app, state);
  lab::add_cache_command(app, state);
  lab::add_scenario_command(app, state);
  lab::add_demo_command(app, state);
  lab::add_loss_command(app, state);
  lab::add_grad_command(app, state);
  lab::add_convert_command(app, state);
  lab::add_detect_command(app, state);
  lab::add_data_command(app, state);
  lab::add_val_command(app, state);
  lab::add_train_command(app, state);
  app.set_version_flag("--version", [&state] { return lab::version_text(state.arch); },
                       "Print the version, git commit, NVRTC version and compile target, then exit");
  try {
    lab::reject_unknown_verb(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "lab: " << lab::printable(e.what()) << "\n";
    return 2;
  } catch (const lab::UsageError& e) {
    std::cerr << "lab: " << lab::printable(e.what()) << "\n";
    return 2;
  } catch (const lab::CompileError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lab: " << lab::printable(e.what()) << "\n";
    return 1;
  }
  return state.exit_code;
}
