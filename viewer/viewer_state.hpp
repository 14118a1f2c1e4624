// The viewer's whole UI state in plain structs: the kernel workspace, the Kernels panel (selection, editor,
// compile job and its result), the Run panel (parameters, run job, result, heatmap), the Pipeline and Train
// panels, and settings.
#pragma once
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "viewer/assembly_view.hpp"
#include "viewer/code_editor.hpp"
#include "viewer/heatmap.hpp"
#include "viewer/kernel_compile.hpp"
#include "viewer/kernel_run.hpp"
#include "viewer/kernel_workspace.hpp"
#include "viewer/pipeline_session.hpp"
#include "harness/scenario.hpp"
#include "viewer/settings.hpp"
#include "viewer/train_session.hpp"

namespace lab::viewer {

template <class T>
bool job_ready(const std::future<T>& job) {
  return job.valid() && job.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

struct KernelsState {
  const Runner* runner = nullptr;
  std::string variant;
  std::string file;        // tree-relative path shown in the editor
  std::string saved_text;  // the file as last read or written
  CodeEditor editor;
  bool auto_compile = true;
  double last_edit_time = -1;  // seconds (ImGui time) of the last unsaved edit, -1: none pending
  std::future<CompileOutcome> compile_job;
  std::optional<bool> compile_pending;     // a compile asked for while one runs (value: from the editor text)
  std::optional<CompileOutcome> compiled;  // the last finished compile
  std::string status;                      // one line: saved, compiling, errors ...
  std::string output_tab;                  // requested tab of the compiler outputs: "source", "ptx" ...
  AssemblySelection assembly;              // the source line the PTX / SASS tabs highlight
};

struct RunState {
  std::map<std::string, std::string> params;  // text values of the selected runner's parameters
  int seed = 1;
  std::string backend;
  std::optional<Tolerance> tolerance;  // from a scenario case
  std::string scenario_case;           // label of the case the parameters came from
  std::future<RunOutcome> job;
  std::optional<RunOutcome> result;
  int output_index = 0;
  int slice = 0;
  bool heatmap_dirty = true;
  HeatmapGrid grid;
  GlTexture texture;
  std::string slice_note;  // how the output was cut into 2-D slices
};

struct PipelineState {
  std::string image_path;
  std::string executor;  // "reference", "cpu", "cuda"
  Image preview;         // the opened image, shown before a run
  GlTexture image_texture;
  bool image_dirty = false;
  std::future<PipelineRun> job;
  std::shared_ptr<PipelineRun> run;  // the last run that succeeded: it stays on screen when a later one fails
  std::string failure;               // the latest run's failure (fault, crash, compile error), or empty
  std::future<std::vector<LayerError>> compare_job;
  std::vector<LayerError> layer_errors;
  std::string compare_failure;
  bool rerun_on_save = true;       // saving a kernel file re-runs the pipeline (when it has run before)
  bool rerun_requested = false;    // a save asked for a re-run while one was going
  bool compare_after_run = false;  // the user compared once: every later run is compared too
  float confidence = 0.25f;
  // Feature map view.
  std::string feature_layer = "layer22";
  int feature_channel = 0;
  bool feature_dirty = true;
  HeatmapGrid feature_grid;
  GlTexture feature_texture;
  // Attention view: block, head and the query pixel (source-image coordinates).
  int attention_index = 0, head = 0;
  std::optional<std::pair<int, int>> query;
  bool attention_dirty = true;
  HeatmapGrid attention_grid;
  GlTexture attention_texture;
  // Where the image was drawn last frame (screen pixels), for script pixel checks.
  float image_x = 0, image_y = 0, image_scale = 1;
  std::string tab;  // requested tab: "detections", "features"
};

// The Train panel: the request being edited, the session (made by the first start) and the latest copy of
// its progress with the plot series made from it.
struct TrainState {
  TrainRequest request;
  std::unique_ptr<TrainSession> session;
  TrainProgress progress;
  std::vector<std::pair<std::string, std::vector<float>>> curves;  // loss components, lr, gradient norm
  GlTexture image_texture;
  long long texture_serial = 0;  // the assignment snapshot the texture shows
  bool show_one2many = true, show_one2one = true;
  size_t wait_steps = 0;             // a script's wait_steps: busy until this many steps (or the run ended)
  std::string tab;                   // requested tab: "curves", "assignment"
  float image_x = 0, image_y = 0, image_scale = 1;  // where the image was drawn last frame
};

struct ViewerState {
  KernelWorkspace workspace;
  std::vector<std::string> backends;  // usable here, preferred first
  std::filesystem::path scenarios_dir;
  std::vector<Scenario> scenarios;
  std::vector<std::string> scenario_errors;
  std::filesystem::path settings_file;
  Settings settings;
  KernelsState kernels;
  RunState run;
  PipelineState pipeline;
  TrainState train;
  std::string panel_request;  // "Kernels", "Run", "Pipeline", "Train": selected by the next frame
  std::string message;        // last action error, shown in the status bar
};

}  // namespace lab::viewer
