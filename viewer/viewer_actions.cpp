// Viewer actions and background jobs (compile on a thread, runs in a child process waited on a thread).
#include "viewer/viewer_actions.hpp"

#include <unistd.h>

#include <fstream>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/detect/detector.hpp"
#include "viewer/train_actions.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

// Seconds of no typing before an auto-compile of the editor text.
constexpr double kAutoCompilePause = 1.0;

const std::vector<Diagnostic> kNoDiagnostics;

void load_editor(ViewerState& s, const std::string& rel) {
  s.kernels.file = rel;
  s.kernels.saved_text = read_tree_file(s.workspace, rel);
  s.kernels.editor.text = s.kernels.saved_text;
  s.kernels.editor.highlight_line = 0;
  s.kernels.editor.scroll_to_line = 1;
  s.kernels.last_edit_time = -1;
  s.kernels.editor.error_lines.clear();
  for (const Diagnostic& d : current_diagnostics(s))
    if (d.file == rel && d.severity == "error") s.kernels.editor.error_lines.insert(d.line);
}

void reset_run_params(ViewerState& s) {
  s.run.params.clear();
  for (const ParamSpec& p : s.kernels.runner->params()) s.run.params[p.name] = p.default_value;
  s.run.tolerance.reset();
  s.run.scenario_case.clear();
  s.run.result.reset();
}

// A copy of the tree with the editor's text in place of its file, for compiling unsaved edits.
KernelWorkspace shadow_workspace(const ViewerState& s) {
  const fs::path dir = fs::temp_directory_path() / ("lab-viewer-shadow-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  fs::copy(s.workspace.dir, dir, fs::copy_options::recursive, ec);
  if (ec) throw RuntimeError("cannot copy the kernel tree to '" + dir.string() + "': " + ec.message());
  std::ofstream(dir / s.kernels.file, std::ios::binary) << s.kernels.editor.text;
  KernelWorkspace shadow = s.workspace;
  shadow.context.tree = KernelTree::from_directory(dir);
  return shadow;
}

void refresh_error_marks(ViewerState& s) {
  s.kernels.editor.error_lines.clear();
  s.kernels.editor.highlight_line = 0;
  for (const Diagnostic& d : current_diagnostics(s))
    if (d.file == s.kernels.file && d.severity == "error") s.kernels.editor.error_lines.insert(d.line);
}

}  // namespace

const std::vector<Diagnostic>& current_diagnostics(const ViewerState& s) {
  if (s.kernels.compiled && !s.kernels.compiled->diagnostics.empty()) return s.kernels.compiled->diagnostics;
  if (s.run.result && !s.run.result->diagnostics.empty()) return s.run.result->diagnostics;
  return kNoDiagnostics;
}

void open_kernel(ViewerState& s, const std::string& name, const std::string& variant) {
  const Runner& runner = Registry::instance().get(name);
  s.kernels.runner = &runner;
  s.kernels.variant = resolve_variant(runner, variant);
  s.kernels.compiled.reset();
  s.settings.last_kernel = runner.name();
  s.settings.last_variant = s.kernels.variant;
  reset_run_params(s);
  load_editor(s, runner.source_path());
  start_compile(s);
}

void select_variant(ViewerState& s, const std::string& variant) {
  if (!s.kernels.runner) throw UsageError("no kernel is open");
  s.kernels.variant = resolve_variant(*s.kernels.runner, variant);
  s.settings.last_variant = s.kernels.variant;
  start_compile(s);
}

void open_file(ViewerState& s, const std::string& rel) {
  if (!s.workspace.context.tree->exists(rel))
    throw UsageError("'" + rel + "' is not a file of the kernel tree " + s.workspace.dir.string());
  load_editor(s, rel);
}

void insert_editor_line(ViewerState& s, int line, const std::string& text) {
  if (s.kernels.file.empty()) throw UsageError("no file is open in the editor");
  if (line < 1) throw UsageError("line numbers start at 1, got " + std::to_string(line));
  insert_line(s.kernels.editor.text, line, text);
}

void note_edit(ViewerState& s, double now) {
  s.kernels.last_edit_time = now;
}

void save_file(ViewerState& s) {
  if (s.kernels.file.empty()) throw UsageError("no file is open in the editor");
  write_tree_file(s.workspace, s.kernels.file, s.kernels.editor.text);
  s.kernels.saved_text = s.kernels.editor.text;
  s.kernels.last_edit_time = -1;
  s.kernels.status = "saved " + (s.workspace.dir / s.kernels.file).string();
  start_compile(s);
  // Live editing reaches the pipeline: the next run builds its kernels from the saved tree.
  if (s.pipeline.rerun_on_save && (s.pipeline.run || !s.pipeline.failure.empty()) &&
      runs_our_kernels(s.pipeline.executor))
    s.pipeline.rerun_requested = true;
}

void start_compile(ViewerState& s, bool from_editor) {
  if (!s.kernels.runner) return;
  if (s.kernels.compile_job.valid()) {
    s.kernels.compile_pending = from_editor;
    return;
  }
  Params params;
  try {
    params = resolve_params(*s.kernels.runner, s.run.params);
  } catch (const UsageError& e) {
    s.kernels.status = std::string("parameters: ") + e.what();
    return;
  }
  KernelWorkspace ws = s.workspace;
  if (from_editor) {
    try {
      ws = shadow_workspace(s);
    } catch (const std::exception& e) {
      s.kernels.status = e.what();
      return;
    }
  }
  s.kernels.compile_job =
      std::async(std::launch::async, [ws, runner = s.kernels.runner, variant = s.kernels.variant, params] {
        return compile_kernel(ws, *runner, variant, params);
      });
  s.kernels.status = "compiling " + s.kernels.runner->name() + " / " + s.kernels.variant + " ...";
}

void start_run(ViewerState& s) {
  if (!s.kernels.runner) throw UsageError("no kernel is open");
  if (s.run.job.valid()) return;
  RunRequest r;
  r.kernel = s.kernels.runner->name();
  r.variant = s.kernels.variant;
  r.backend = s.run.backend;
  r.params = s.run.params;
  r.seed = static_cast<uint64_t>(s.run.seed);
  r.tolerance = s.run.tolerance;
  r.kernels_dir = s.workspace.dir.string();
  r.cache_dir = s.workspace.cache_dir;
  s.run.job = std::async(std::launch::async, [r] { return run_in_child(r); });
}

void apply_scenario_case(ViewerState& s, const Scenario& scenario, const ScenarioCase& c) {
  if (!s.kernels.runner || s.kernels.runner->name() != scenario.kernel) open_kernel(s, scenario.kernel);
  reset_run_params(s);
  for (const auto& [k, v] : c.params) s.run.params[k] = v;
  s.run.tolerance = c.tolerance;
  s.run.scenario_case = fs::path(scenario.path).filename().string() + " / " + c.name;
  if (!scenario.seeds.empty()) s.run.seed = static_cast<int>(scenario.seeds.front());
}

void jump_to_diagnostic(ViewerState& s, const Diagnostic& d) {
  if (d.file != s.kernels.file && s.workspace.context.tree->exists(d.file)) load_editor(s, d.file);
  s.kernels.editor.highlight_line = d.line;
  s.kernels.editor.scroll_to_line = d.line;
  s.panel_request = "Kernels";
}

void follow_in_editor(ViewerState& s) {
  const SourceLine& selected = s.kernels.assembly.source;
  if (selected.file != s.kernels.file || selected.line <= 0) return;
  s.kernels.editor.highlight_line = selected.line;
  s.kernels.editor.scroll_to_line = selected.line;
}

void select_kernel_source_line(ViewerState& s, int line) {
  if (s.kernels.file.empty()) throw UsageError("no file is open");
  if (line < 1 || line > line_count(s.kernels.editor.text))
    throw UsageError(s.kernels.file + " has no line " + std::to_string(line));
  select_source_line(s.kernels.assembly, {s.kernels.file, line});
  follow_in_editor(s);
}

void click_assembly_line(ViewerState& s, const std::string& kind, int n) {
  if (!s.kernels.compiled || !s.kernels.compiled->ok) throw UsageError("no successful compile yet");
  if (kind != "ptx" && kind != "sass") throw UsageError("click_assembly_line takes ptx or sass, not '" + kind + "'");
  const AssemblyListing& listing = kind == "ptx" ? s.kernels.compiled->ptx_listing : s.kernels.compiled->sass_listing;
  if (n < 1 || n > static_cast<int>(listing.lines.size()))
    throw UsageError("the " + kind + " listing has " + std::to_string(listing.lines.size()) + " lines, no line " +
                     std::to_string(n));
  if (!select_assembly_line(s.kernels.assembly, listing, static_cast<size_t>(n - 1)))
    throw UsageError(kind + " line " + std::to_string(n) + " has no source line");
  follow_in_editor(s);
}

void open_image(ViewerState& s, const std::string& path) {
  s.pipeline.preview = decode_image(path);
  s.pipeline.image_path = path;
  s.pipeline.image_dirty = true;
  s.pipeline.run.reset();
  s.pipeline.failure.clear();
  s.pipeline.layer_errors.clear();
  s.pipeline.query.reset();
  s.settings.last_image = path;
}

void start_pipeline(ViewerState& s) {
  if (s.pipeline.image_path.empty()) throw UsageError("open an image first");
  if (s.pipeline.job.valid()) return;
  s.pipeline.rerun_requested = false;
  PipelineRequest r;
  r.image_path = s.pipeline.image_path;
  r.executor = s.pipeline.executor;
  r.kernels_dir = s.workspace.dir.string();
  r.cache_dir = s.workspace.cache_dir;
  s.pipeline.job = std::async(std::launch::async, [r] { return run_pipeline(r); });
}

void pick_query_pixel(ViewerState& s, int x, int y) {
  const Image& img = s.pipeline.run ? s.pipeline.run->image : s.pipeline.preview;
  if (x < 0 || y < 0 || x >= img.width || y >= img.height)
    throw UsageError("pixel (" + std::to_string(x) + ", " + std::to_string(y) + ") is outside the " +
                     std::to_string(img.height) + "x" + std::to_string(img.width) + " (h x w) image");
  s.pipeline.query = std::pair<int, int>(x, y);
  s.pipeline.attention_dirty = true;
}

void start_reference_comparison(ViewerState& s) {
  if (!s.pipeline.run) throw UsageError("run the pipeline first");
  if (s.pipeline.compare_job.valid()) return;
  s.pipeline.compare_after_run = true;
  s.pipeline.compare_job =
      std::async(std::launch::async, [run = s.pipeline.run] { return compare_with_reference(*run); });
}

void poll_jobs(ViewerState& s, double now) {
  poll_training(s);
  if (job_ready(s.pipeline.job)) {
    // A failed run (a faulting kernel, a compile error) is reported beside the last good run, which stays.
    PipelineRun done = s.pipeline.job.get();
    s.pipeline.failure = done.failure;
    if (done.failure.empty()) {
      s.pipeline.run = std::make_shared<PipelineRun>(std::move(done));
      s.pipeline.layer_errors.clear();
      s.pipeline.compare_failure.clear();
      s.pipeline.image_dirty = s.pipeline.feature_dirty = s.pipeline.attention_dirty = true;
      if (!s.pipeline.query)
        s.pipeline.query =
            std::pair<int, int>(s.pipeline.run->image.width / 2, s.pipeline.run->image.height / 2);
      if (s.pipeline.compare_after_run && runs_our_kernels(s.pipeline.executor)) start_reference_comparison(s);
    }
  }
  if (s.pipeline.rerun_requested && !s.pipeline.job.valid()) start_pipeline(s);
  if (job_ready(s.pipeline.compare_job)) {
    try {
      s.pipeline.layer_errors = s.pipeline.compare_job.get();
    } catch (const std::exception& e) {
      s.pipeline.compare_failure = e.what();
    }
  }
  if (job_ready(s.kernels.compile_job)) {
    s.kernels.compiled = s.kernels.compile_job.get();
    const CompileOutcome& c = *s.kernels.compiled;
    if (c.ok)
      s.kernels.status = "compiled " + c.kernel + " / " + c.variant + " for " + c.arch;
    else
      s.kernels.status = c.diagnostics.empty()
                             ? "compile failed: " + c.message
                             : "compile failed: " + std::to_string(c.diagnostics.size()) + " diagnostic(s)";
    refresh_error_marks(s);
    if (s.kernels.compile_pending) {
      const bool from_editor = *s.kernels.compile_pending;
      s.kernels.compile_pending.reset();
      start_compile(s, from_editor);
    }
    const auto& diags = current_diagnostics(s);
    for (const Diagnostic& d : diags)
      if (d.severity == "error" && d.file == s.kernels.file) {
        s.kernels.editor.highlight_line = d.line;
        break;
      }
  }
  if (job_ready(s.run.job)) {
    s.run.result = s.run.job.get();
    s.run.output_index = 0;
    s.run.slice = 0;
    s.run.heatmap_dirty = true;
    if (!s.run.result->diagnostics.empty()) refresh_error_marks(s);
  }
  const bool edited = s.kernels.editor.text != s.kernels.saved_text;
  if (s.kernels.auto_compile && edited && s.kernels.last_edit_time >= 0 &&
      now - s.kernels.last_edit_time > kAutoCompilePause && !s.kernels.compile_job.valid()) {
    s.kernels.last_edit_time = -1;
    start_compile(s, true);
  }
}

void guarded(ViewerState& s, void (*action)(ViewerState&)) {
  try {
    action(s);
    s.message.clear();
  } catch (const std::exception& e) {
    s.message = e.what();
  }
}

bool busy(const ViewerState& s) {
  return s.kernels.compile_job.valid() || s.run.job.valid() || s.pipeline.job.valid() ||
         s.pipeline.compare_job.valid() || s.pipeline.rerun_requested || training_busy(s);
}

}  // namespace lab::viewer
