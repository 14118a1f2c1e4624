// `lab cache [list|clear]`: the compile cache directory, its entries, and clearing it.
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "lab/table.hpp"

namespace lab {

void add_cache_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("cache", "Show the compile cache directory; `list` its entries, `clear` it");
  cmd->require_subcommand(0, 1);
  auto json = std::make_shared<bool>(false);
  auto* list = cmd->add_subcommand("list", "List cache entries: key, size, summary");
  list->add_flag("--json", *json, "Machine-readable output");
  auto* clear = cmd->add_subcommand("clear", "Remove every cache entry");

  cmd->footer(
      "Examples:\n"
      "  lab cache                  # where the cache lives\n"
      "  lab cache list --json\n"
      "  lab cache clear\n");
  cmd->callback([&state, cmd] {
    if (cmd->get_subcommands().empty()) std::cout << state.context().cache->root().string() << "\n";
  });
  list->callback([&state, json] {
    const auto cache = state.context().cache;
    const auto entries = cache->list();
    if (*json) {
      nlohmann::json out = {{"directory", cache->root().string()}, {"entries", nlohmann::json::array()}};
      for (const CacheEntryInfo& e : entries)
        out["entries"].push_back({{"key", e.key}, {"bytes", e.bytes}, {"summary", e.summary}});
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << cache->root().string() << ": " << entries.size() << " entries\n";
    if (entries.empty()) return;
    Table table({"key", "size", "summary"});
    double total = 0;
    for (const CacheEntryInfo& e : entries) {
      table.add({e.key.substr(0, 16), format_bytes(double(e.bytes)), e.summary});
      total += double(e.bytes);
    }
    table.print(std::cout);
    std::cout << "total " << format_bytes(total) << "\n";
  });
  clear->callback([&state] {
    const auto cache = state.context().cache;
    const CacheClearReport report = cache->clear();
    std::cout << "removed " << report.removed << " entries from " << cache->root().string() << "\n";
    if (report.failures.empty()) return;
    std::string listed;  // the first few, so the error stays one line
    for (size_t i = 0; i < report.failures.size() && i < 3; ++i)
      listed += (i ? ", " : "") + report.failures[i];
    if (report.failures.size() > 3) listed += ", ...";
    throw RuntimeError("cache clear: could not remove " + std::to_string(report.failures.size()) +
                       " item(s): " + listed);
  });
}

}  // namespace lab
