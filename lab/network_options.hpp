// What `lab detect` and `lab val` share around the network: the --model, --backend and --devices options,
// what --backend auto resolves to on this machine, and the --json output (a file written atomically, or
// stdout with '-').
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/nn/precision.hpp"

namespace lab {

// Adds --model (a checkpoint; empty: the default search of model_locator.hpp) to `cmd`.
void add_model_option(CLI::App* cmd, std::string& value);

// Adds --backend to `cmd`, stored in `value` (default auto).
void add_executor_option(CLI::App* cmd, std::string& value);

// Adds --devices (default "0") to `cmd`.
void add_devices_option(CLI::App* cmd, std::string& value);

// --devices: "all" or comma-separated GPU ordinals for cuda (one forward worker per GPU); for cpu and
// reference each entry is one more forward worker on the host. UsageError "--devices ...: ..." when
// malformed.
std::vector<int> parse_devices(const std::string& text, const std::string& executor);

// auto: cuda with a GPU; without one the CPU reference, or the cpu backend for a reduced precision (the
// reference forward only accumulates in float64). `note` says why, for the header line.
std::string resolve_executor(const std::string& requested, Precision precision, std::string& note);

// Writes `document` to stdout when `target` is "-", else to the file `target` atomically, telling `human`.
void write_json_output(const std::string& target, const std::string& document, std::ostream& human);

}  // namespace lab
