// Scenario files (scenarios/*.toml): a runner name plus parameter sets ([[case]]) with optional variants,
// backends, seeds, tolerances and `bench` marks. Parsing checks syntax, types and key names, and reports
// every problem as a UsageError "file:line: message". Format:
//   kernel = "detect_decode"      variants = ["v1"]      backends = ["cpu", "cuda"]      seeds = [1, 2]
//   [[case]]  name = "..."  params = { B = 1 }  tolerance = { rel_l2 = 1e-6, max_abs = 1e-3 }
//             backends = ["cuda"]  bench = true
// A tolerance that gives only one of rel_l2 / max_abs keeps Tolerance's default for the other.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/runner.hpp"

namespace lab {

struct ScenarioCase {
  std::string name;
  Params params;  // as written, not yet resolved against the runner
  std::optional<Tolerance> tolerance;
  std::vector<std::string> backends;  // empty: the scenario's
  bool bench = false;
  int line = 0;  // of the [[case]] header
};

struct Scenario {
  std::string path;  // as given; prefixes every error message
  std::string kernel;
  int kernel_line = 0;
  std::vector<std::string> variants;  // empty: every variant of the runner
  int variants_line = 0;
  std::vector<std::string> backends;  // empty: every backend
  int backends_line = 0;
  std::vector<uint64_t> seeds{1};
  std::vector<ScenarioCase> cases;
};

// Parses TOML text; `path` names the file in messages.
Scenario parse_scenario(std::string_view text, const std::string& path);
// Reads and parses a file (UsageError when it cannot be read).
Scenario load_scenario(const std::filesystem::path& path);
// Every *.toml directly under `dir`, sorted; empty when the directory does not exist.
std::vector<std::filesystem::path> scenario_files(const std::filesystem::path& dir);
// Every scenario file of `dir` that parses; the messages of those that do not are appended to `errors`.
std::vector<Scenario> load_scenario_dir(const std::filesystem::path& dir, std::vector<std::string>& errors);

}  // namespace lab
