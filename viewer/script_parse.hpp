// The scripted mode's language: one action per line, `#` starts a comment; the verbs and their arguments are
// listed in docs/viewer.md ("Scripted mode"), and a test checks that every documented action parses and that
// every verb is documented. A text argument (TEXT..., PATH of open_image) is the rest of the line after one
// blank. A malformed script is a usage error (exit 2) reported before anything runs.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace lab::viewer {

struct ScriptAction {
  int line = 0;
  std::string verb;
  std::vector<std::string> args;  // for verbs taking TEXT..., the last one is the rest of the line
};

// Parses and validates verbs, argument counts and whole-number arguments; throws UsageError "FILE:LINE: ...".
std::vector<ScriptAction> parse_script(const std::filesystem::path& file);

// Argument `i` of `a` as a whole number; throws UsageError "FILE:LINE: ..." otherwise.
int script_int(const ScriptAction& a, size_t i, const std::string& file);

// Every verb the parser accepts.
std::vector<std::string> script_verbs();

}  // namespace lab::viewer
