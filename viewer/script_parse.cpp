// Script parsing: the verbs of scripted mode with their argument counts, checked before anything runs.
#include "viewer/script_parse.hpp"

#include <map>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

struct VerbShape {
  size_t min_args, max_args;
  bool rest_of_line;  // the last argument takes the rest of the line
};

const std::map<std::string, VerbShape>& verbs() {
  static const std::map<std::string, VerbShape> v = {{"open_kernel", {1, 2, false}},
                                                     {"select_variant", {1, 1, false}},
                                                     {"open_file", {1, 1, false}},
                                                     {"insert_text", {2, 2, true}},
                                                     {"save", {0, 0, false}},
                                                     {"compile", {0, 0, false}},
                                                     {"set_param", {2, 2, false}},
                                                     {"set_seed", {1, 1, false}},
                                                     {"set_backend", {1, 1, false}},
                                                     {"run", {0, 0, false}},
                                                     {"select_output", {1, 1, false}},
                                                     {"select_panel", {1, 1, false}},
                                                     {"select_tab", {1, 1, false}},
                                                     {"click_error", {1, 1, false}},
                                                     {"select_source_line", {1, 1, false}},
                                                     {"click_assembly_line", {2, 2, false}},
                                                     {"screenshot", {1, 1, false}},
                                                     {"open_image", {1, 1, true}},
                                                     {"run_pipeline", {0, 0, false}},
                                                     {"compare_layers", {0, 0, false}},
                                                     {"set_confidence", {1, 1, false}},
                                                     {"select_attention", {2, 2, false}},
                                                     {"click_pixel", {2, 2, false}},
                                                     {"select_feature", {2, 2, false}},
                                                     {"select_pipeline_tab", {1, 1, false}},
                                                     {"expect_box_pixels", {0, 0, false}},
                                                     {"set_executor", {1, 1, false}},
                                                     {"expect_text", {1, 1, true}},
                                                     {"expect_no_text", {1, 1, true}},
                                                     {"frames", {1, 1, false}},
                                                     {"set_train", {2, 2, true}},
                                                     {"start_training", {0, 0, false}},
                                                     {"pause_training", {0, 0, false}},
                                                     {"resume_training", {0, 0, false}},
                                                     {"stop_training", {0, 0, false}},
                                                     {"wait_steps", {1, 1, false}},
                                                     {"refresh_assignment", {0, 0, false}},
                                                     {"show_anchors", {2, 2, false}},
                                                     {"select_train_tab", {1, 1, false}},
                                                     {"expect_anchor_pixels", {0, 0, false}}};
  return v;
}

}  // namespace

int script_int(const ScriptAction& a, size_t i, const std::string& file) {
  try {
    size_t used = 0;
    const int v = std::stoi(a.args.at(i), &used);
    if (used == a.args[i].size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(file + ":" + std::to_string(a.line) + ": " + a.verb + " expects a whole number, got '" +
                   a.args.at(i) + "'");
}

std::vector<ScriptAction> parse_script(const fs::path& file) {
  std::istringstream in(read_input_file(file, "viewer script"));
  std::vector<ScriptAction> actions;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.pop_back();
    std::istringstream words(text.substr(first));
    ScriptAction a;
    a.line = line;
    words >> a.verb;
    const auto it = verbs().find(a.verb);
    if (it == verbs().end())
      throw UsageError(file.string() + ":" + std::to_string(line) + ": unknown action '" + a.verb + "'");
    const VerbShape shape = it->second;
    std::string word;
    while (a.args.size() + 1 < shape.max_args && words >> word) a.args.push_back(word);
    if (shape.rest_of_line) {
      // One blank ends the previous word; the rest is kept verbatim (insert_text keeps its indentation).
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) rest.erase(0, 1);
      if (rest.find_first_not_of(" \t") != std::string::npos) a.args.push_back(rest);
    } else if (words >> word) {
      a.args.push_back(word);
      if (words >> word)
        throw UsageError(file.string() + ":" + std::to_string(line) + ": too many arguments for " + a.verb);
    }
    if (a.args.size() < shape.min_args)
      throw UsageError(file.string() + ":" + std::to_string(line) + ": " + a.verb + " needs " +
                       std::to_string(shape.min_args) + " argument(s)");
    actions.push_back(std::move(a));
  }
  for (const ScriptAction& a : actions) {
    if (a.verb == "insert_text" || a.verb == "set_seed" || a.verb == "click_error" || a.verb == "frames" ||
        a.verb == "click_pixel" || a.verb == "select_attention" || a.verb == "select_source_line" ||
        a.verb == "wait_steps")
      script_int(a, 0, file.string());
    if (a.verb == "click_pixel" || a.verb == "select_attention" || a.verb == "select_feature" ||
        a.verb == "click_assembly_line")
      script_int(a, 1, file.string());
  }
  return actions;
}

std::vector<std::string> script_verbs() {
  std::vector<std::string> names;
  for (const auto& [name, shape] : verbs()) names.push_back(name);
  return names;
}

}  // namespace lab::viewer
