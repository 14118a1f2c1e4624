// What the UI and the scripts can do to the viewer state: open a kernel or file, edit, save, compile, run,
// apply a scenario case, jump to a diagnostic; and the per-frame harvest of finished background jobs.
// Failures of bad input (unknown kernel, bad parameter) throw UsageError; compile and run failures are
// results shown in the panels, never exceptions.
#pragma once
#include <string>

#include "viewer/viewer_state.hpp"

namespace lab::viewer {

void open_kernel(ViewerState& s, const std::string& name, const std::string& variant = "");
void select_variant(ViewerState& s, const std::string& variant);
// Opens a file of the kernel tree in the editor (the kernel selection stays).
void open_file(ViewerState& s, const std::string& rel);
// Inserts a line into the editor text (1-based line), as typing would.
void insert_editor_line(ViewerState& s, int line, const std::string& text);
// Marks the editor as edited now (auto-compile waits for a pause after the last edit).
void note_edit(ViewerState& s, double now);

// Writes the editor's file into the kernel tree and recompiles.
void save_file(ViewerState& s);
// Compiles the selected kernel; with `from_editor`, the unsaved editor text is compiled in a shadow copy of
// the tree (the tree itself is untouched).
void start_compile(ViewerState& s, bool from_editor = false);
void start_run(ViewerState& s);
void apply_scenario_case(ViewerState& s, const Scenario& scenario, const ScenarioCase& c);
void jump_to_diagnostic(ViewerState& s, const Diagnostic& d);
// The PTX / SASS tabs' selection: select `line` of the editor's file, or the source line of assembly line
// `n` (1-based) of the last compile's "ptx" or "sass" listing (UsageError when there is no such line or it
// has no source line); the editor highlights the selected line when it shows that file.
void select_kernel_source_line(ViewerState& s, int line);
void click_assembly_line(ViewerState& s, const std::string& kind, int n);
void follow_in_editor(ViewerState& s);

// Pipeline: open an image (decoded now; UsageError naming the file), run YOLO26 on it, pick a query pixel
// (source-image coordinates) for the attention view, compare every layer with the CPU reference.
void open_image(ViewerState& s, const std::string& path);
void start_pipeline(ViewerState& s);
void pick_query_pixel(ViewerState& s, int x, int y);
void start_reference_comparison(ViewerState& s);

// Runs a UI action: its failure (UsageError ...) becomes the status line's message, a success clears it.
void guarded(ViewerState& s, void (*action)(ViewerState&));

// Harvests finished jobs and triggers auto-compile; called once per frame.
void poll_jobs(ViewerState& s, double now);
bool busy(const ViewerState& s);

// The diagnostics the error list shows: of the last compile, else of the last run.
const std::vector<Diagnostic>& current_diagnostics(const ViewerState& s);

}  // namespace lab::viewer
