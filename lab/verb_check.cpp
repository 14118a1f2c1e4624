// The typed verb against the registered subcommands.
#include "lab/verb_check.hpp"

#include <string>
#include <vector>

#include "kernels/name_suggestion.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

void reject_unknown_verb(CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return;
    if (word.size() > 1 && word[0] == '-') {
      const CLI::Option* option = app.get_option_no_throw(word);
      if (option && word.find('=') == std::string::npos && option->get_items_expected_max() > 0) ++i;
      continue;
    }
    std::vector<std::string> verbs;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == word) return;
      verbs.push_back(sub->get_name());
    }
    throw UsageError("unknown command '" + word + "'" + unknown_name_hint(word, verbs));
  }
}

}  // namespace lab
