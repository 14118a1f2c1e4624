// `lab-viewer`: the visual debugger, or (with --run-child / --pipeline-child, used by the viewer itself) one
// isolated kernel run or pipeline run. Exit codes as for `lab`: 0 ok, 1 a failed script expectation or
// runtime failure, 2 bad usage or input.
#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/param_args.hpp"
#include "viewer/app.hpp"
#include "viewer/kernel_run.hpp"
#include "viewer/pipeline_session.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace {

// -1 when parsed; else the exit code (0 for --help, 2 for bad usage with a one-line message).
int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "lab-viewer: " << e.what() << "\n";
    return 2;
  }
}

int child_mode(int argc, char** argv) {
  lab::viewer::RunRequest r;
  std::string result_file;
  std::vector<std::string> params;
  double rel_l2 = -1, max_abs = -1;
  CLI::App app{"lab-viewer child run (internal)", "lab-viewer"};
  app.add_flag("--run-child")->description("Run one kernel and write its result file");
  app.add_option("KERNEL", r.kernel)->required();
  app.add_option("--result-file", result_file)->required();
  app.add_option("--backend", r.backend)->required();
  app.add_option("--variant", r.variant);
  app.add_option("--seed", r.seed);
  app.add_option("--param", params);
  app.add_option("--kernels-dir", r.kernels_dir);
  app.add_option("--cache-dir", r.cache_dir);
  app.add_option("--rel-l2", rel_l2);
  app.add_option("--max-abs", max_abs);
  if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
  r.params = lab::parse_param_args(params);
  if (rel_l2 >= 0 && max_abs >= 0) r.tolerance = lab::Tolerance{rel_l2, max_abs};
  return lab::viewer::run_child_main(r, result_file);
}

int pipeline_child_mode(int argc, char** argv) {
  lab::viewer::PipelineRequest r;
  std::string result_dir;
  CLI::App app{"lab-viewer child pipeline run (internal)", "lab-viewer"};
  app.add_flag("--pipeline-child")->description("Run YOLO26 on one image and write the result folder");
  app.add_option("IMAGE", r.image_path)->required();
  app.add_option("--executor", r.executor)->required();
  app.add_option("--result-dir", result_dir)->required();
  app.add_option("--kernels-dir", r.kernels_dir);
  app.add_option("--cache-dir", r.cache_dir);
  if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
  return lab::viewer::pipeline_child_main(r, result_dir);
}

int viewer_mode(int argc, char** argv) {
  lab::viewer::ViewerOptions o;
  CLI::App app{"YOLO26 Kernel Lab visual debugger: edit, compile, inspect and run kernels", "lab-viewer"};
  app.add_option(
      "--kernels-dir", o.kernels_dir,
      "Editable kernel tree (default: $LAB_KERNELS_DIR, the checkout's kernels/ when started inside "
      "it, else a per-user copy of the embedded sources)");
  app.add_option("--cache-dir", o.cache_dir, "Compile cache (default: $LAB_CACHE_DIR, else the XDG cache)");
  app.add_option("--config-dir", o.config_dir,
                 "Settings folder (default: $XDG_CONFIG_HOME/yolo26-lab, else ~/.config/yolo26-lab)");
  app.add_option("--kernel", o.kernel, "Kernel to open at start (default: the last one)");
  app.add_option("--script", o.script, "Drive the UI with the actions of FILE, then exit")
      ->check(CLI::ExistingFile);
  app.add_option("--screenshot-dir", o.screenshot_dir, "Folder for the script's screenshots (default: .)");
  app.add_option("--width", o.width, "Window width")->check(CLI::Range(640, 8192));
  app.add_option("--height", o.height, "Window height")->check(CLI::Range(480, 8192));
  if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
  return lab::viewer::run_viewer(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "--run-child") return child_mode(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "--pipeline-child") return pipeline_child_mode(argc, argv);
    return viewer_mode(argc, argv);
  } catch (const lab::UsageError& e) {
    std::cerr << "lab-viewer: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lab-viewer: " << e.what() << "\n";
    return 1;
  }
}
