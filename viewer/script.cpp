// Script parsing and the one-action-per-idle-frame executor.
#include "script.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/draw.hpp"
#include "screenshot.hpp"
#include "ui_text.hpp"
#include "viewer_actions.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

// Frames drawn after each action before the next one, so layout and tab changes show.
constexpr int kSettleFrames = 3;
// Longest wait for background work (compile, run) of one action.
constexpr double kActionTimeoutS = 900;

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
                                                     {"frames", {1, 1, false}}};
  return v;
}

int to_int(const ScriptAction& a, size_t i, const std::string& file) {
  try {
    size_t used = 0;
    const int v = std::stoi(a.args.at(i), &used);
    if (used == a.args[i].size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(file + ":" + std::to_string(a.line) + ": " + a.verb + " expects a whole number, got '" +
                   a.args.at(i) + "'");
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<ScriptAction> parse_script(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw UsageError("cannot read the script '" + file.string() + "'");
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
        a.verb == "click_pixel" || a.verb == "select_attention" || a.verb == "select_source_line")
      to_int(a, 0, file.string());
    if (a.verb == "click_pixel" || a.verb == "select_attention" || a.verb == "select_feature" ||
        a.verb == "click_assembly_line")
      to_int(a, 1, file.string());
  }
  return actions;
}

ScriptRunner::ScriptRunner(fs::path file, std::vector<ScriptAction> actions, fs::path screenshot_dir)
    : file_(std::move(file)), actions_(std::move(actions)), screenshot_dir_(std::move(screenshot_dir)) {}

void ScriptRunner::fail(const ScriptAction& a, const std::string& message) {
  std::cerr << file_.string() << ":" << a.line << ": " << a.verb << ": " << message << "\n";
  exit_code_ = 1;
  finished_ = true;
}

void ScriptRunner::step(ViewerState& s) {
  if (finished_) return;
  if (busy(s)) {
    if (busy_since_ < 0) busy_since_ = now_s();
    if (now_s() - busy_since_ > kActionTimeoutS && next_ > 0)
      fail(actions_[next_ - 1],
           "background work still running after " + std::to_string(static_cast<int>(kActionTimeoutS)) + " s");
    return;
  }
  busy_since_ = -1;
  if (settle_frames_ > 0) {
    --settle_frames_;
    return;
  }
  if (next_ == actions_.size()) {
    finished_ = true;
    return;
  }
  const ScriptAction& a = actions_[next_++];
  settle_frames_ = kSettleFrames;
  try {
    execute(s, a);
  } catch (const std::exception& e) {
    fail(a, e.what());
  }
}

void ScriptRunner::after_render(const ViewerState& s, int width, int height) {
  if (!screenshot_.empty()) {
    try {
      save_framebuffer_png(screenshot_, width, height);
    } catch (const std::exception& e) {
      std::cerr << "lab-viewer: " << e.what() << "\n";
      exit_code_ = 1;
      finished_ = true;
    }
    screenshot_.clear();
  }
  if (!pixel_check_) return;
  const ScriptAction& a = *pixel_check_;
  pixel_check_ = nullptr;
  const PipelineState& p = s.pipeline;
  int boxes = 0, matching = 0;
  std::string detail;
  for (const Detection& d : p.run->detections) {
    if (d.score <= p.confidence) continue;
    ++boxes;
    const Rgb want = class_colour(d.class_id);
    const auto at = [&](double x, double y) {
      return read_framebuffer_pixel(static_cast<int>(p.image_x + x * p.image_scale),
                                    static_cast<int>(p.image_y + y * p.image_scale), height);
    };
    const auto same = [&](const std::array<uint8_t, 3>& got) {
      for (int c = 0; c < 3; ++c)
        if (std::abs(int(got[c]) - int(want[c])) > 8) return false;
      return true;
    };
    const bool ok = same(at(d.x1, (d.y1 + d.y2) / 2)) || same(at((d.x1 + d.x2) / 2, d.y2));
    matching += ok ? 1 : 0;
    if (!ok) detail += " " + d.name;
  }
  if (boxes == 0)
    fail(a, "no boxes above the confidence threshold");
  else if (4 * matching < 3 * boxes)
    fail(a, std::to_string(boxes - matching) + " of " + std::to_string(boxes) +
                " boxes lack their class colour on the screen:" + detail);
}

void ScriptRunner::execute(ViewerState& s, const ScriptAction& a) {
  const auto arg = [&](size_t i) -> const std::string& { return a.args.at(i); };
  const std::string& v = a.verb;
  if (v == "open_kernel") {
    open_kernel(s, arg(0), a.args.size() > 1 ? arg(1) : "");
  } else if (v == "select_variant") {
    select_variant(s, arg(0));
  } else if (v == "open_file") {
    open_file(s, arg(0));
  } else if (v == "insert_text") {
    insert_editor_line(s, to_int(a, 0, file_.string()), arg(1));
  } else if (v == "save") {
    save_file(s);
  } else if (v == "compile") {
    start_compile(s, s.kernels.editor.text != s.kernels.saved_text);
  } else if (v == "set_param") {
    if (!s.kernels.runner) throw UsageError("no kernel is open");
    s.run.params[arg(0)] = arg(1);
    resolve_params(*s.kernels.runner, s.run.params);
  } else if (v == "set_seed") {
    s.run.seed = to_int(a, 0, file_.string());
  } else if (v == "set_backend") {
    if (std::find(s.backends.begin(), s.backends.end(), arg(0)) == s.backends.end())
      throw UsageError("backend '" + arg(0) + "' is not available here");
    s.run.backend = arg(0);
  } else if (v == "run") {
    start_run(s);
  } else if (v == "select_output") {
    if (!s.run.result) throw UsageError("no run result yet");
    const auto& checks = s.run.result->checks;
    const auto it =
        std::find_if(checks.begin(), checks.end(), [&](const auto& c) { return c.output == arg(0); });
    if (it == checks.end()) throw UsageError("no output named '" + arg(0) + "'");
    s.run.output_index = static_cast<int>(it - checks.begin());
    s.run.heatmap_dirty = true;
  } else if (v == "select_panel") {
    s.panel_request = arg(0);
  } else if (v == "select_tab") {
    s.kernels.output_tab = arg(0);
  } else if (v == "click_error") {
    const auto& diags = current_diagnostics(s);
    const int n = to_int(a, 0, file_.string());
    if (n < 1 || n > static_cast<int>(diags.size()))
      throw UsageError("there are " + std::to_string(diags.size()) + " diagnostics, no number " + arg(0));
    jump_to_diagnostic(s, diags[static_cast<size_t>(n - 1)]);
  } else if (v == "select_source_line") {
    select_kernel_source_line(s, to_int(a, 0, file_.string()));
  } else if (v == "click_assembly_line") {
    click_assembly_line(s, arg(0), to_int(a, 1, file_.string()));
  } else if (v == "screenshot") {
    std::error_code ec;
    fs::create_directories(screenshot_dir_, ec);
    screenshot_ = screenshot_dir_ / arg(0);
  } else if (v == "expect_text" || v == "expect_no_text") {
    const bool found = ui_text_contains(arg(0));
    if (found != (v == "expect_text")) {
      std::string shown;
      for (const std::string& t : ui_text_last_frame()) shown += "\n  | " + t;
      fail(a, std::string(found ? "unexpected" : "no") + " text '" + arg(0) +
                  "' on screen; the screen shows:" + shown);
    }
  } else if (v == "open_image") {
    open_image(s, arg(0));
  } else if (v == "set_executor") {
    s.pipeline.executor = arg(0);
  } else if (v == "run_pipeline") {
    start_pipeline(s);
  } else if (v == "compare_layers") {
    start_reference_comparison(s);
  } else if (v == "set_confidence") {
    s.pipeline.confidence = std::stof(arg(0));
  } else if (v == "select_attention") {
    s.pipeline.attention_index = to_int(a, 0, file_.string());
    s.pipeline.head = to_int(a, 1, file_.string());
    s.pipeline.attention_dirty = true;
  } else if (v == "click_pixel") {
    pick_query_pixel(s, to_int(a, 0, file_.string()), to_int(a, 1, file_.string()));
  } else if (v == "select_feature") {
    s.pipeline.feature_layer = arg(0);
    s.pipeline.feature_channel = to_int(a, 1, file_.string());
    s.pipeline.feature_dirty = true;
  } else if (v == "select_pipeline_tab") {
    s.pipeline.tab = arg(0);
  } else if (v == "expect_box_pixels") {
    if (!s.pipeline.run || !s.pipeline.run->failure.empty()) throw UsageError("no pipeline result to check");
    pixel_check_ = &a;
  } else if (v == "frames") {
    settle_frames_ = to_int(a, 0, file_.string());
  }
}

}  // namespace lab::viewer
