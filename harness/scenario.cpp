// Scenario TOML parsing with toml++ (header-only here, the one file that parses TOML).
#define TOML_HEADER_ONLY 1
#include "harness/scenario.hpp"

#include <algorithm>
#include <charconv>

#include <toml++/toml.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab {

namespace {

constexpr size_t kMaxMessageBytes = 240;  // of a parse error after the file:line (it may quote the file)

class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const toml::source_region& where, const std::string& message) const {
    throw UsageError(printable(path_) + ":" + std::to_string(where.begin.line) + ": " +
                     printable(message, kMaxMessageBytes));
  }

  static int line_of(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

  std::string string_value(const toml::node& node, const std::string& key) const {
    if (const auto* s = node.as_string()) return s->get();
    fail(node.source(), "'" + key + "' must be a string");
  }

  bool bool_value(const toml::node& node, const std::string& key) const {
    if (const auto* b = node.as_boolean()) return b->get();
    fail(node.source(), "'" + key + "' must be true or false");
  }

  double number_value(const toml::node& node, const std::string& key) const {
    if (const auto* f = node.as_floating_point()) return f->get();
    if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
    fail(node.source(), "'" + key + "' must be a number");
  }

  std::vector<std::string> string_list(const toml::node& node, const std::string& key) const {
    const auto* array = node.as_array();
    if (!array) fail(node.source(), "'" + key + "' must be an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *array) out.push_back(string_value(item, key + " element"));
    return out;
  }

  std::vector<std::string> backend_list(const toml::node& node, const std::string& key) const {
    std::vector<std::string> names = string_list(node, key);
    for (const std::string& name : names)
      if (name != "cpu" && name != "cuda")
        fail(node.source(), "unknown backend '" + name + "' in '" + key + "' (valid: cpu, cuda)");
    return names;
  }

  std::vector<uint64_t> seed_list(const toml::node& node) const {
    const auto* array = node.as_array();
    if (!array || array->empty()) fail(node.source(), "'seeds' must be a non-empty array of integers");
    std::vector<uint64_t> out;
    for (const toml::node& item : *array) {
      const auto* i = item.as_integer();
      if (!i || i->get() < 0) fail(item.source(), "'seeds' elements must be non-negative integers");
      out.push_back(static_cast<uint64_t>(i->get()));
    }
    return out;
  }

  // A parameter value as the text Params holds.
  std::string param_text(const toml::node& node, const std::string& key) const {
    if (const auto* s = node.as_string()) return s->get();
    if (const auto* i = node.as_integer()) return std::to_string(i->get());
    if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
    if (const auto* f = node.as_floating_point()) {
      char buf[64];
      const auto result = std::to_chars(buf, buf + sizeof buf, f->get());
      return std::string(buf, result.ptr);
    }
    fail(node.source(), "parameter '" + key + "' must be an integer, float, boolean or string");
  }

  Params params(const toml::node& node) const {
    const auto* table = node.as_table();
    if (!table) fail(node.source(), "'params' must be a table, e.g. params = { B = 1 }");
    Params out;
    for (auto&& [key, value] : *table)
      out[std::string(key.str())] = param_text(value, std::string(key.str()));
    return out;
  }

  Tolerance tolerance(const toml::node& node) const {
    const auto* table = node.as_table();
    if (!table) fail(node.source(), "'tolerance' must be a table, e.g. tolerance = { rel_l2 = 1e-5 }");
    Tolerance tol;
    for (auto&& [key, value] : *table) {
      const std::string k(key.str());
      if (k != "rel_l2" && k != "max_abs")
        fail(key.source(), "unknown key '" + k + "' in tolerance (valid: rel_l2, max_abs)");
      const double v = number_value(value, k);
      if (!(v >= 0)) fail(value.source(), "'" + k + "' must be >= 0");
      (k == "rel_l2" ? tol.rel_l2 : tol.max_abs) = v;
    }
    return tol;
  }

  ScenarioCase scenario_case(const toml::node& node) const {
    const auto* table = node.as_table();
    if (!table) fail(node.source(), "'case' must be an array of tables ([[case]])");
    ScenarioCase c;
    c.line = line_of(node);
    bool named = false;
    for (auto&& [key, value] : *table) {
      const std::string k(key.str());
      if (k == "name") {
        c.name = string_value(value, k);
        named = true;
      } else if (k == "params") {
        c.params = params(value);
      } else if (k == "tolerance") {
        c.tolerance = tolerance(value);
      } else if (k == "backends") {
        c.backends = backend_list(value, k);
      } else if (k == "bench") {
        c.bench = bool_value(value, k);
      } else {
        fail(key.source(),
             "unknown key '" + k + "' in [[case]] (valid: name, params, tolerance, backends, bench)");
      }
    }
    if (!named) fail(node.source(), "[[case]] needs a name");
    return c;
  }

  Scenario scenario(const toml::table& root) const {
    Scenario s;
    s.path = path_;
    for (auto&& [key, value] : root) {
      const std::string k(key.str());
      if (k == "kernel") {
        s.kernel = string_value(value, k);
        s.kernel_line = line_of(value);
      } else if (k == "variants") {
        s.variants = string_list(value, k);
        s.variants_line = line_of(value);
      } else if (k == "backends") {
        s.backends = backend_list(value, k);
        s.backends_line = line_of(value);
      } else if (k == "seeds") {
        s.seeds = seed_list(value);
      } else if (k == "case") {
        const auto* cases = value.as_array();
        if (!cases) fail(value.source(), "'case' must be an array of tables ([[case]])");
        for (const toml::node& c : *cases) s.cases.push_back(scenario_case(c));
      } else {
        fail(key.source(), "unknown key '" + k + "' (valid: kernel, variants, backends, seeds, case)");
      }
    }
    if (s.kernel.empty()) throw UsageError(path_ + ":1: missing 'kernel = \"NAME\"'");
    if (s.cases.empty()) throw UsageError(path_ + ":1: no [[case]] tables");
    return s;
  }

 private:
  std::string path_;
};

}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& path) {
  Parser parser(path);
  try {
    const toml::table root = toml::parse(text, path);
    return parser.scenario(root);
  } catch (const toml::parse_error& e) {
    parser.fail(e.source(), std::string(e.description()));
  }
}

Scenario load_scenario(const std::filesystem::path& path) {
  return parse_scenario(read_input_file(path, "scenario file"), path.string());
}

std::vector<std::filesystem::path> scenario_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Scenario> load_scenario_dir(const std::filesystem::path& dir, std::vector<std::string>& errors) {
  std::vector<Scenario> scenarios;
  for (const auto& file : scenario_files(dir)) {
    try {
      scenarios.push_back(load_scenario(file));
    } catch (const UsageError& e) {
      errors.push_back(e.what());
    }
  }
  return scenarios;
}

}  // namespace lab
