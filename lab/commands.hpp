// The verbs of `lab`; each file cmd_<verb>.cpp adds one subcommand whose callback does the work.
#pragma once
#include <CLI/CLI.hpp>

#include "lab/cli_state.hpp"

namespace lab {

void add_list_command(CLI::App& app, CliState& state);
void add_source_command(CLI::App& app, CliState& state);
void add_run_command(CLI::App& app, CliState& state);
void add_bench_command(CLI::App& app, CliState& state);
void add_cache_command(CLI::App& app, CliState& state);
void add_scenario_command(CLI::App& app, CliState& state);
void add_demo_command(CLI::App& app, CliState& state);
void add_loss_command(CLI::App& app, CliState& state);
void add_grad_command(CLI::App& app, CliState& state);
void add_convert_command(CLI::App& app, CliState& state);
void add_detect_command(CLI::App& app, CliState& state);
void add_data_command(CLI::App& app, CliState& state);
void add_val_command(CLI::App& app, CliState& state);
void add_train_command(CLI::App& app, CliState& state);

}  // namespace lab
