// `lab list [KERNEL]`: every runner (or one) with its family, variants, parameters, source file and the
// scenarios that use it.
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "harness/scenario.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

std::map<std::string, std::vector<std::string>> scenario_files_by_kernel(const CliState& state) {
  std::vector<std::string> errors;
  std::map<std::string, std::vector<std::string>> by_kernel;
  for (const Scenario& s : load_scenario_dir(state.scenarios_directory(), errors))
    by_kernel[s.kernel].push_back(std::filesystem::path(s.path).filename().string());
  for (const std::string& e : errors) std::cerr << "lab: warning: " << e << "\n";
  return by_kernel;
}

nlohmann::json runner_json(const Runner& r, const std::vector<std::string>& scenarios) {
  nlohmann::json variants = nlohmann::json::array(), params = nlohmann::json::array();
  const auto vs = r.variants();
  for (size_t i = 0; i < vs.size(); ++i)
    variants.push_back({{"name", vs[i].name}, {"description", vs[i].description}, {"default", i == 0}});
  for (const ParamSpec& p : r.params())
    params.push_back({{"name", p.name},
                      {"kind", param_kind_name(p.kind)},
                      {"default", p.default_value},
                      {"help", p.help},
                      {"rule", param_rule(p)}});
  return {{"name", r.name()},          {"family", r.family()}, {"description", r.description()},
          {"source", r.source_path()}, {"variants", variants}, {"params", params},
          {"scenarios", scenarios}};
}

void print_runner(std::ostream& os, const Runner& r, const std::vector<std::string>& scenarios) {
  os << r.name() << "  [" << r.family() << "]  " << r.source_path() << "\n  " << r.description() << "\n";
  os << "  variants (* = default):\n";
  const auto vs = r.variants();
  for (size_t i = 0; i < vs.size(); ++i)
    os << "    " << vs[i].name << (i == 0 ? " *" : "") << "  " << vs[i].description << "\n";
  Table params({"param", "default", "rule", "meaning"});
  for (const ParamSpec& p : r.params()) params.add({p.name, p.default_value, param_rule(p), p.help});
  os << "  params:\n";
  params.print(os, "    ");
  os << "  scenarios: " << (scenarios.empty() ? "(none)" : join(scenarios, ", ")) << "\n";
}

}  // namespace

void add_list_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand(
      "list", "List every kernel runner (or one: KERNEL): family, variants, parameters, scenarios");
  auto json = std::make_shared<bool>(false);
  auto kernel = std::make_shared<std::string>();
  cmd->add_option("KERNEL", *kernel, "Only this runner (see `lab list`)");
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  lab list                       # every kernel\n"
      "  lab list flash_attn2_fwd       # one kernel: variants, parameters and their rules, scenarios\n"
      "  lab list conv2d --json\n");
  cmd->callback([&state, json, kernel] {
    const auto scenarios = scenario_files_by_kernel(state);
    auto files_of = [&](const Runner& r) {
      auto it = scenarios.find(r.name());
      return it == scenarios.end() ? std::vector<std::string>{} : it->second;
    };
    if (!kernel->empty()) {
      const Runner& runner = Registry::instance().get(*kernel);
      if (*json)
        std::cout << runner_json(runner, files_of(runner)).dump(2) << "\n";
      else
        print_runner(std::cout, runner, files_of(runner));
      return;
    }
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const Runner* r : Registry::instance().all()) out.push_back(runner_json(*r, files_of(*r)));
      std::cout << out.dump(2) << "\n";
      return;
    }
    const auto runners = Registry::instance().all();
    for (size_t i = 0; i < runners.size(); ++i) {
      if (i) std::cout << "\n";
      print_runner(std::cout, *runners[i], files_of(*runners[i]));
    }
  });
}

}  // namespace lab
