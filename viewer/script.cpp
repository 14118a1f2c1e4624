// Scripted mode: the one-action-per-idle-frame executor of parsed scripts (script_parse.hpp).
#include "viewer/script.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/image/draw.hpp"
#include "viewer/screenshot.hpp"
#include "viewer/train_actions.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

// Frames drawn after each action before the next one, so layout and tab changes show.
constexpr int kSettleFrames = 3;
// Longest wait for background work (compile, run) of one action.
constexpr double kActionTimeoutS = 900;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The rendered frame's colour at (x, y) of an image drawn at (image_x, image_y) with `scale`, against `want`.
bool pixel_has(double x, double y, float image_x, float image_y, float scale, const Rgb& want, int height) {
  const std::array<uint8_t, 3> got = read_framebuffer_pixel(static_cast<int>(image_x + x * scale),
                                                            static_cast<int>(image_y + y * scale), height);
  for (int c = 0; c < 3; ++c)
    if (std::abs(int(got[c]) - int(want[c])) > 8) return false;
  return true;
}

// "" when at least 3 of 4 boxes (others may cover a few pixels of them) show their colour, else what failed:
// `none` without boxes, "N of M boxes <lacking>" + detail otherwise.
std::string majority_problem(int boxes, int matching, const std::string& none, const std::string& lacking,
                             const std::string& detail) {
  if (boxes == 0) return none;
  if (4 * matching >= 3 * boxes) return "";
  return std::to_string(boxes - matching) + " of " + std::to_string(boxes) + " boxes " + lacking + detail;
}

// expect_box_pixels: each shown detection's class colour on its left or bottom edge.
std::string box_pixel_problem(const ViewerState& s, int height) {
  const PipelineState& p = s.pipeline;
  int boxes = 0, matching = 0;
  std::string detail;
  for (const Detection& d : p.run->detections) {
    if (d.score <= p.confidence) continue;
    ++boxes;
    const Rgb want = class_colour(d.class_id);
    const bool ok = pixel_has(d.x1, (d.y1 + d.y2) / 2, p.image_x, p.image_y, p.image_scale, want, height) ||
                    pixel_has((d.x1 + d.x2) / 2, d.y2, p.image_x, p.image_y, p.image_scale, want, height);
    matching += ok ? 1 : 0;
    if (!ok) detail += " " + d.name;
  }
  return majority_problem(boxes, matching, "no boxes above the confidence threshold",
                          "lack their class colour on the screen:", detail);
}

// expect_anchor_pixels: the box's colour at the centre of one of its one-to-many positives (any: a tooltip or
// another box's outline may cover some), for each box that has them.
std::string anchor_pixel_problem(const ViewerState& s, int height) {
  const TrainState& t = s.train;
  int boxes = 0, matching = 0;
  std::string detail;
  const train::AssignmentView& v = t.progress.assignment->view;
  for (size_t i = 0; i < v.boxes.size(); ++i) {
    if (v.boxes[i].one2many.empty()) continue;
    ++boxes;
    const Rgb want = class_colour(static_cast<int>(i));
    const auto shows = [&](const train::PositiveAnchor& p) {
      return pixel_has(p.x, p.y, t.image_x, t.image_y, t.image_scale, want, height);
    };
    const bool ok = std::any_of(v.boxes[i].one2many.begin(), v.boxes[i].one2many.end(), shows);
    matching += ok ? 1 : 0;
    if (!ok) detail += " box " + std::to_string(i);
  }
  return majority_problem(boxes, matching, "no box has one-to-many positives",
                          "lack their colour at their one-to-many positives:", detail);
}

}  // namespace

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
  const std::string problem =
      a.verb == "expect_box_pixels" ? box_pixel_problem(s, height) : anchor_pixel_problem(s, height);
  if (!problem.empty()) fail(a, problem);
}

void ScriptRunner::execute_train(ViewerState& s, const ScriptAction& a) {
  const auto arg = [&](size_t i) -> const std::string& { return a.args.at(i); };
  const std::string& v = a.verb;
  if (v == "set_train") {
    set_train_setting(s, arg(0), arg(1));
  } else if (v == "start_training") {
    start_training(s);
  } else if (v == "pause_training") {
    pause_training(s);
  } else if (v == "resume_training") {
    resume_training(s);
  } else if (v == "stop_training") {
    stop_training(s);
  } else if (v == "wait_steps") {
    s.train.wait_steps = static_cast<size_t>(script_int(a, 0, file_.string()));
  } else if (v == "refresh_assignment") {
    refresh_assignment(s);
  } else if (v == "show_anchors") {
    if ((arg(0) != "o2m" && arg(0) != "o2o") || (arg(1) != "on" && arg(1) != "off"))
      throw UsageError("show_anchors expects o2m|o2o on|off");
    (arg(0) == "o2m" ? s.train.show_one2many : s.train.show_one2one) = arg(1) == "on";
  } else if (v == "select_train_tab") {
    s.train.tab = arg(0);
  } else if (v == "expect_anchor_pixels") {
    if (!s.train.progress.assignment) throw UsageError("no assignment view to check");
    pixel_check_ = &a;
  }
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
    insert_editor_line(s, script_int(a, 0, file_.string()), arg(1));
  } else if (v == "save") {
    save_file(s);
  } else if (v == "compile") {
    start_compile(s, s.kernels.editor.text != s.kernels.saved_text);
  } else if (v == "set_param") {
    if (!s.kernels.runner) throw UsageError("no kernel is open");
    s.run.params[arg(0)] = arg(1);
    resolve_params(*s.kernels.runner, s.run.params);
  } else if (v == "set_seed") {
    s.run.seed = script_int(a, 0, file_.string());
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
    const int n = script_int(a, 0, file_.string());
    if (n < 1 || n > static_cast<int>(diags.size()))
      throw UsageError("there are " + std::to_string(diags.size()) + " diagnostics, no number " + arg(0));
    jump_to_diagnostic(s, diags[static_cast<size_t>(n - 1)]);
  } else if (v == "select_source_line") {
    select_kernel_source_line(s, script_int(a, 0, file_.string()));
  } else if (v == "click_assembly_line") {
    click_assembly_line(s, arg(0), script_int(a, 1, file_.string()));
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
    const std::vector<std::string> executors = available_executors();
    if (std::find(executors.begin(), executors.end(), arg(0)) == executors.end())
      throw UsageError("executor '" + arg(0) + "' is not available here");
    s.pipeline.executor = arg(0);
  } else if (v == "run_pipeline") {
    start_pipeline(s);
  } else if (v == "compare_layers") {
    start_reference_comparison(s);
  } else if (v == "set_confidence") {
    s.pipeline.confidence = std::stof(arg(0));
  } else if (v == "select_attention") {
    s.pipeline.attention_index = script_int(a, 0, file_.string());
    s.pipeline.head = script_int(a, 1, file_.string());
    s.pipeline.attention_dirty = true;
  } else if (v == "click_pixel") {
    pick_query_pixel(s, script_int(a, 0, file_.string()), script_int(a, 1, file_.string()));
  } else if (v == "select_feature") {
    s.pipeline.feature_layer = arg(0);
    s.pipeline.feature_channel = script_int(a, 1, file_.string());
    s.pipeline.feature_dirty = true;
  } else if (v == "select_pipeline_tab") {
    s.pipeline.tab = arg(0);
  } else if (v == "expect_box_pixels") {
    if (!s.pipeline.run) throw UsageError("no pipeline result to check");
    pixel_check_ = &a;
  } else if (v == "frames") {
    settle_frames_ = script_int(a, 0, file_.string());
  } else {
    execute_train(s, a);
  }
}

}  // namespace lab::viewer
