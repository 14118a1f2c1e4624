// Scripted mode (`lab-viewer --script FILE --screenshot-dir DIR`): named actions drive the UI one at a time,
// each after the previous one's background work finished and the UI settled for a few frames. Used by the
// [viewer] tests and to make the screenshots of docs/viewer.md. One action per line, `#` starts a comment:
//   open_kernel NAME [VARIANT]   select_variant NAME     open_file TREE_PATH
//   insert_text LINE TEXT...     save                     compile
//   set_param NAME VALUE         set_seed N               set_backend cuda|cpu
//   run                          select_output NAME       select_panel Kernels|Run|Pipeline
//   select_tab source|ptx|sass|resources|log              click_error N (1-based, jumps to its line)
//   select_source_line LINE (of the editor's file: the PTX/SASS tabs highlight its assembly lines)
//   click_assembly_line ptx|sass N (1-based line of the listing: selects the source line it came from)
//   open_image PATH              run_pipeline             compare_layers           set_confidence C
//   select_attention NAME HEAD   click_pixel X Y (image pixels)     select_feature LAYER CHANNEL
//   select_pipeline_tab detections|features                expect_box_pixels
//   screenshot NAME.png          expect_text TEXT...      expect_no_text TEXT...      frames N
// expect_box_pixels reads the rendered frame on each shown box's left and bottom edges and expects the box's
// class colour there (for at least 3 of 4 boxes: others may cover a few edges).
// A failed expectation or action ends the viewer with exit 1 and "FILE:LINE: message"; a malformed script
// is a usage error (exit 2) reported before anything runs.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace lab::viewer {

struct ViewerState;

struct ScriptAction {
  int line = 0;
  std::string verb;
  std::vector<std::string> args;  // for verbs taking TEXT..., the last one is the rest of the line
};

// Parses and validates verbs and argument counts; throws UsageError "FILE:LINE: ...".
std::vector<ScriptAction> parse_script(const std::filesystem::path& file);

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
  void fail(const ScriptAction& a, const std::string& message);

  std::filesystem::path file_;
  std::vector<ScriptAction> actions_;
  std::filesystem::path screenshot_dir_;
  std::filesystem::path screenshot_;
  const ScriptAction* pixel_check_ = nullptr;  // expect_box_pixels waiting for the rendered frame
  size_t next_ = 0;
  int settle_frames_ = 3;
  double busy_since_ = -1;
  bool finished_ = false;
  int exit_code_ = 0;
};

}  // namespace lab::viewer
