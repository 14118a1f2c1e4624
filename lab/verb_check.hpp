// Catches a mistyped verb before CLI11 does (it would only say "A subcommand is required"): the first word
// that is neither an option nor a global option's value must name a verb.
#pragma once
#include <CLI/CLI.hpp>

namespace lab {

// UsageError "unknown command 'detetc' (did you mean 'detect'?)" (or the list of verbs when nothing is
// close) when the typed verb is not one of `app`'s subcommands; nothing when there is no verb (CLI11 then
// reports the missing one) or the word follows `--`.
void reject_unknown_verb(CLI::App& app, int argc, const char* const* argv);

}  // namespace lab
