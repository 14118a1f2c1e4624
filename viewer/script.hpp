// Scripted mode (`lab-viewer --script FILE --screenshot-dir DIR`): the parsed actions (script_parse.hpp,
// listed with their arguments in docs/viewer.md, "Scripted mode") drive the UI one at a time, each after the
// previous one's background work finished and the UI settled for a few frames. Used by the [viewer] tests and
// to make the screenshots of docs/viewer.md. A failed expectation or action ends the viewer with exit 1 and
// "FILE:LINE: message".
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "viewer/script_parse.hpp"

namespace lab::viewer {

struct ViewerState;

class ScriptRunner {
 public:
  ScriptRunner(std::filesystem::path file, std::vector<ScriptAction> actions,
               std::filesystem::path screenshot_dir);

  // Called once per frame before the UI is built. Executes at most one action when the viewer is idle.
  void step(ViewerState& s);
  // Called after the frame is rendered, before it is shown: takes a requested screenshot or pixel check.
  void after_render(const ViewerState& s, int width, int height);
  bool finished() const { return finished_; }
  int exit_code() const { return exit_code_; }

 private:
  void execute(ViewerState& s, const ScriptAction& a);
  void execute_train(ViewerState& s, const ScriptAction& a);  // the Train panel's verbs
  void fail(const ScriptAction& a, const std::string& message);

  std::filesystem::path file_;
  std::vector<ScriptAction> actions_;
  std::filesystem::path screenshot_dir_;
  std::filesystem::path screenshot_;
  const ScriptAction* pixel_check_ = nullptr;  // expect_box_pixels / expect_anchor_pixels: the next frame
  size_t next_ = 0;
  int settle_frames_ = 3;
  double busy_since_ = -1;
  bool finished_ = false;
  int exit_code_ = 0;
};

}  // namespace lab::viewer
