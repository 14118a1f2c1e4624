// The visual debugger driven by scripts under Xvfb (`lab-viewer --script`): a syntax error inserted in a
// kernel is listed at its line and the line is highlighted; a kernel run shows PASS; a kernel that faults is
// reported with its name while the viewer goes on; YOLO26 draws its boxes and an attention map; edits of the
// kernels the pipeline uses re-run it and show in the per-layer errors, or as a named fault beside the last
// good run; the editor draws UTF-8; the Train panel trains on a synthetic dataset, pauses, draws each box's
// positive anchors in its colour and stops, and names a bad dataset. Without the viewer binary, xvfb-run or a
// usable GL the tests WARN and return.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cmath>
#include <fstream>
#include <sstream>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"
#include "kernels/runner.hpp"
#include "harness/scenario_runner.hpp"
#include "pipeline/dataset/synth_dataset.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"

#ifndef LAB_VIEWER_BINARY

TEST_CASE("viewer: scripted UI tests", "[viewer]") {
  WARN("skipped: lab-viewer was not built (GLFW, OpenGL, Dear ImGui or stb missing)");
}

#else

#include <stb/stb_image.h>

namespace fs = std::filesystem;

namespace {

struct ViewerRun {
  bool skipped = false;
  int exit_code = -1;
  std::string log;
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A copy of the embedded kernel tree the script may edit.
fs::path copy_kernel_tree(const fs::path& root) {
  const auto tree = lab::KernelTree::embedded();
  for (const std::string& rel : tree->list()) lab::test::write_file(root / "kernels" / rel, tree->read(rel));
  return root / "kernels";
}

// Runs the viewer on `script` in a virtual X server; screenshots land in dir/shots.
ViewerRun run_viewer_script(const fs::path& dir, const std::string& script) {
  ViewerRun r;
  if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) {
    WARN("skipped: xvfb-run is not installed");
    r.skipped = true;
    return r;
  }
  lab::test::write_file(dir / "script.txt", script);
  const fs::path kernels = copy_kernel_tree(dir);
  // The viewer's own exit status goes to a file: xvfb-run's status also reports its own clean-up (it exited 5
  // once in CI after the viewer had exited 1, "problem while cleaning up temporary directory").
  const fs::path exit_file = dir / "viewer-exit-status.txt";
  fs::remove(exit_file);
  const std::string command = "xvfb-run -a -s '-screen 0 1600x1000x24' sh -c '\"$0\" \"$@\"; echo $? > " +
                              exit_file.string() + "' " + std::string(LAB_VIEWER_BINARY) +
                              " --script " + (dir / "script.txt").string() + " --screenshot-dir " +
                              (dir / "shots").string() + " --kernels-dir " + kernels.string() +
                              " --config-dir " + (dir / "config").string() + " --cache-dir " +
                              (fs::temp_directory_path() / "lab-viewer-test-cache").string() +
                              " --width 1600 --height 1000 > " + (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (fs::exists(exit_file)) r.exit_code = std::stoi(read_all(exit_file));
  r.log = read_all(dir / "log.txt");
  if (r.log.find("cannot initialise GLFW") != std::string::npos ||
      r.log.find("cannot create an OpenGL 3 window") != std::string::npos) {
    WARN("skipped: no usable OpenGL under Xvfb here:\n" << r.log);
    r.skipped = true;
  }
  return r;
}

struct Png {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  size_t count(bool (*match)(const unsigned char*)) const {
    size_t n = 0;
    for (size_t i = 0; i + 2 < rgb.size(); i += 3) n += match(&rgb[i]) ? 1 : 0;
    return n;
  }
};

Png load_png(const fs::path& p) {
  Png png;
  int channels = 0;
  unsigned char* data = stbi_load(p.c_str(), &png.width, &png.height, &channels, 3);
  REQUIRE(data != nullptr);
  png.rgb.assign(data, data + size_t(png.width) * png.height * 3);
  stbi_image_free(data);
  return png;
}

// Line 17 of detect/detect_decode.cu is the first line of the kernel body.
constexpr int kBodyLine = 17;

// The script lines that open `image` in the Pipeline panel and run the network on the cpu emulator.
std::string run_pipeline_on(const fs::path& image) {
  return "select_panel Pipeline\nset_executor cpu\nopen_image " + image.string() + "\nrun_pipeline\n";
}

}  // namespace

TEST_CASE("viewer: a syntax error inserted in a kernel is listed at its line and highlighted", "[viewer]") {
  lab::test::ScratchDir dir("viewer-error");
  const std::string script =
      "open_kernel detect_decode\n"
      "insert_text " +
      std::to_string(kBodyLine) +
      "   int broken = undeclared_name;\n"
      "save\n"
      "expect_text compile failed\n"
      "expect_text detect/detect_decode.cu:" +
      std::to_string(kBodyLine) +
      ":\n"
      "expect_text undeclared_name\n"
      "click_error 1\n"
      "screenshot error.png\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
  // The edit reached the kernel tree, with its indentation (one blank separates the line number).
  CHECK(read_all(dir.path / "kernels/detect/detect_decode.cu").find("\n  int broken = undeclared_name;\n") !=
        std::string::npos);
  // The highlighted error line: a band of dark red behind the text.
  const Png png = load_png(dir.path / "shots/error.png");
  CHECK(png.count([](const unsigned char* p) { return p[0] > 100 && p[0] < 170 && p[1] < 50 && p[2] < 50; }) >
        2000);
}

TEST_CASE("viewer: running a kernel shows PASS with its metrics", "[viewer]") {
  lab::test::ScratchDir dir("viewer-run");
  const std::string script =
      "open_kernel detect_decode\n"
      "select_panel Run\n"
      "set_param IMG_H 320\n"
      "set_backend cpu\n"
      "run\n"
      "expect_text PASS\n"
      "expect_no_text FAIL\n"
      "expect_text worst element\n"
      "screenshot run.png\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
  // The PASS verdicts are drawn in green.
  const Png png = load_png(dir.path / "shots/run.png");
  CHECK(png.count([](const unsigned char* p) { return p[1] > 200 && p[0] < 110 && p[2] < 110; }) > 50);
}

TEST_CASE("viewer: a faulting kernel is reported with its name and the viewer keeps running", "[viewer]") {
  lab::test::ScratchDir dir("viewer-fault");
  const std::string script =
      "open_kernel detect_decode\n"
      "insert_text " +
      std::to_string(kBodyLine) +
      "   if (threadIdx.x == 0) *(volatile float*)16 = 1.0f;\n"
      "save\n"
      "select_panel Run\n"
      "set_backend cpu\n"
      "run\n"
      "expect_text ERROR\n"
      "expect_text kernel detect_decode\n"
      "run\n"
      "expect_text ERROR\n"
      "screenshot fault.png\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("viewer: YOLO26 on bus.jpg draws its boxes in class colours and an attention map", "[viewer]") {
  const fs::path image = fs::path(LAB_ASSETS_DIR) / "images/bus.jpg";
  if (!fs::exists(image) || !fs::exists(fs::path(LAB_ASSETS_DIR) / "models/yolo26n.pt")) {
    WARN("skipped: the shared assets (bus.jpg, yolo26n.pt) are not at " LAB_ASSETS_DIR);
    return;
  }
  lab::test::ScratchDir dir("viewer-pipeline");
  const std::string script = run_pipeline_on(image) +
                             "expect_text bus 0.\n"
                             "expect_text person 0.\n"
                             "expect_text input 640x480 (h x w)\n"
                             "expect_box_pixels\n"
                             "click_pixel 400 500\n"
                             "expect_text query pixel (400, 500)\n"
                             "screenshot pipeline.png\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
  // The attention heatmap beside the image: its hottest cell is drawn in the top colour of the scale.
  const Png png = load_png(dir.path / "shots/pipeline.png");
  CHECK(png.count([](const unsigned char* p) {
    return std::abs(p[0] - 252) <= 3 && std::abs(p[1] - 242) <= 3 && std::abs(p[2] - 89) <= 3;
  }) > 150);
}

TEST_CASE("viewer: the editor draws UTF-8 (the em dashes of flash_attn2.cu) and names what it cannot",
          "[viewer]") {
  lab::test::ScratchDir dir("viewer-utf8");
  // U+4E2D (a CJK ideograph) is outside the merged glyph ranges: the editor must say so.
  const ViewerRun r = run_viewer_script(dir.path,
                                        "open_kernel flash_attn2_fwd\n"
                                        "expect_text attention/flash_attn2.cu\n"
                                        "expect_no_text have no glyph\n"
                                        "insert_text 1 // \xe4\xb8\xad\n"
                                        "expect_text 1 character(s) of this file have no glyph in the font\n");
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
  CHECK(lab::test::read_text(dir.path / "kernels/attention/flash_attn2.cu").find("\xe2\x80\x94") !=
        std::string::npos);  // the file holds em dashes
}

TEST_CASE("viewer: a malformed script is a usage error naming its line", "[viewer]") {
  lab::test::ScratchDir dir("viewer-bad-script");
  const ViewerRun r = run_viewer_script(dir.path, "open_kernel detect_decode\nfly_to_the_moon\n");
  if (r.skipped) return;
  CHECK(r.exit_code == 2);
  CHECK(r.log.find("script.txt:2: unknown action 'fly_to_the_moon'") != std::string::npos);
}

TEST_CASE("viewer: live edits reach the pipeline: a wrong kernel shows in the layer errors, a fault is named",
          "[viewer]") {
  const fs::path scene = fs::path(LAB_SOURCE_DIR) / "docs/viewer/scene.png";
  if (!fs::exists(fs::path(LAB_ASSETS_DIR) / "models/yolo26n.pt")) {
    WARN("skipped: the shared assets (yolo26n.pt) are not at " LAB_ASSETS_DIR);
    return;
  }
  lab::test::ScratchDir dir("viewer-pipeline-edits");
  // Line 26 of nn/upsample_nearest2x.cu is the kernel's last line; line 26 of nn/maxpool2d.cu follows the
  // plane pointer. Each save re-runs the pipeline (and the comparison, once asked for) in a child process.
  const std::string script = run_pipeline_on(scene) +
                             "expect_text stop sign 0.\n"
                             "expect_text clock 0.\n"
                             "expect_box_pixels\n"
                             "compare_layers\n"
                             "expect_text every tensor within rel L2 1.0e-03 of the reference\n"
                             "open_file nn/upsample_nearest2x.cu\n"
                             "insert_text 26 if (y < h_in) out[b * out_bs + c * out_cs + p] += 0.5f;\n"
                             "save\n"
                             "select_panel Pipeline\n"
                             "expect_text first layer off the reference: layer11 (rel L2\n"
                             "open_file nn/maxpool2d.cu\n"
                             "insert_text 26 if (p == 0) src = (const float*)16;\n"
                             "save\n"
                             "select_panel Pipeline\n"
                             "expect_text pipeline failed\n"
                             "expect_text kernel maxpool2d block (0,0,0)\n"
                             "expect_text null pointer\n"
                             // The last good run (the wrong upsample's) stays on screen with its errors.
                             "expect_text shown: the last run that succeeded\n"
                             "expect_text stop sign 0.\n"
                             "expect_box_pixels\n"
                             "expect_text first layer off the reference: layer11 (rel L2\n"
                             "open_kernel detect_decode\n"
                             "select_panel Kernels\n"
                             "expect_text detect/detect_decode.cu\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(r.log);
  REQUIRE(r.exit_code == 0);
}

namespace {

// The PTX lines of `ptx` that line `line` of file 1 (the kernel) made, by a plain scan of the .loc
// directives: (1-based PTX line, text without surrounding blanks).
std::vector<std::pair<int, std::string>> ptx_lines_of_source_line(const std::string& ptx, int line) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(ptx);
  bool inside = false;
  int n = 0;
  for (std::string text; std::getline(in, text);) {
    ++n;
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const std::string trimmed = text.substr(first, text.find_last_not_of(" \t") - first + 1);
    if (trimmed.rfind(".loc", 0) == 0) {
      inside = trimmed.rfind(".loc\t1 " + std::to_string(line) + " ", 0) == 0;
    } else if (trimmed == "}") {
      inside = false;
    } else if (inside) {
      out.emplace_back(n, trimmed);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("viewer: PTX and SASS beside the source, highlighted from a source line and back", "[viewer]") {
  const lab::Runner& runner = lab::Registry::instance().get("detect_decode");
  const lab::RuntimeContext ctx = lab::test::embedded_context();
  const std::string ptx =
      lab::compile_with_nvrtc(*ctx.tree, *ctx.cache,
                              runner.compile_request(runner.variants().front().name, lab::resolve_params(runner, {})),
                              lab::default_cuda_arch())
          .ptx;
  // Line 26 stores the fourth output; line 20 loads l and t.
  const auto stores = ptx_lines_of_source_line(ptx, 26);
  const auto loads = ptx_lines_of_source_line(ptx, 20);
  REQUIRE(!stores.empty());
  REQUIRE(!loads.empty());
  lab::test::ScratchDir dir("viewer-assembly");
  std::string script =
      "open_kernel detect_decode\n"
      "select_tab ptx\n"
      "select_source_line 26\n"
      "expect_text detect/detect_decode.cu:26: " + std::to_string(stores.size()) + " PTX lines\n";
  for (const auto& [n, text] : stores) script += "expect_text highlighted PTX " + std::to_string(n) + ": " + text + "\n";
  script += "expect_text st.global.f32\n"
            "screenshot ptx_lines.png\n"
            "select_tab sass\n"
            "expect_text SASS lines\n"
            "expect_text STG.E desc\n"
            "select_tab ptx\n"
            "click_assembly_line ptx " + std::to_string(loads.front().first) + "\n"
            "expect_text detect/detect_decode.cu:20: " + std::to_string(loads.size()) + " PTX lines\n"
            "expect_no_text highlighted PTX " + std::to_string(stores.front().first) + ":\n"
            // The resource tab's occupancy (static without a GPU): detect_decode's 8 blocks of 256 threads fill
            // the 64 warps of an SM, limited by the SM's warps.
            "select_tab resources\n"
            "expect_text 64/64\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(script << r.log);
  REQUIRE(r.exit_code == 0);
  // The highlighted rows: a band of the highlight colour in the assembly pane.
  const Png png = load_png(dir.path / "shots/ptx_lines.png");
  CHECK(png.count([](const unsigned char* p) { return p[0] > 70 && p[0] < 110 && p[1] > 50 && p[1] < 80 && p[2] < 40; }) >
        500);
}

TEST_CASE(
    "viewer: the Train panel trains on a synthetic dataset, pauses, shows the assignment, stops, a bad "
    "dataset is reported",
    "[viewer]") {
  const fs::path model = lab::test::assets_dir() / "models" / "yolo26n.pt";
  if (!fs::exists(model)) {
    WARN("skipped: the yolo26n checkpoint is absent");
    return;
  }
  lab::test::ScratchDir dir("viewer-train");
  lab::dataset::SynthOptions synth;
  synth.out = dir.path / "synth";
  synth.classes = 2, synth.train = 8, synth.val = 2, synth.imgsz = 64, synth.seed = 5;
  lab::dataset::write_synth_dataset(synth);
  const std::string script = "select_panel Train\n"
                             "set_train data " + (synth.out / "data.yaml").string() + "\n"
                             "set_train model " + model.string() + "\n"
                             "set_train project " + (dir.path / "runs").string() + "\n"
                             "set_train epochs 2\nset_train batch 2\nset_train nbs 2\nset_train imgsz 64\n"
                             "set_train backend cpu\nset_train every 100\n"
                             "start_training\n"
                             "wait_steps 2\n"
                             "pause_training\n"
                             "expect_text training: paused\n"
                             "expect_text o2m box\n"
                             "expect_text largest: model.\n"
                             "select_train_tab assignment\n"
                             "refresh_assignment\n"
                             "show_anchors o2o off\n"
                             "expect_text positives:\n"
                             "expect_anchor_pixels\n"
                             "screenshot assignment.png\n"
                             "stop_training\n"
                             "expect_text training: stopped\n"
                             "set_train data " + (dir.path / "missing.yaml").string() + "\n"
                             "start_training\n"
                             "wait_steps 1\n"
                             "expect_text training failed\n"
                             "expect_text missing.yaml\n";
  const ViewerRun r = run_viewer_script(dir.path, script);
  if (r.skipped) return;
  INFO(script << r.log);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(dir.path / "shots/assignment.png"));
}

TEST_CASE("viewer: a bad Train panel setting is a one-line error naming the setting", "[viewer]") {
  lab::test::ScratchDir dir("viewer-train-setting");
  for (const auto& [line, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"set_train epochs 0", "train setting epochs: expected a positive whole number, got '0'"},
           {"set_train backend tpu", "train setting backend: 'tpu' is not usable here"},
           {"set_train speed 3", "unknown train setting 'speed'"}}) {
    const ViewerRun r = run_viewer_script(dir.path, "select_panel Train\n" + line + "\n");
    if (r.skipped) return;
    INFO(r.log);
    CHECK(r.exit_code == 1);
    CHECK(lab::test::contains(r.log, "script.txt:2: set_train: " + message));
  }
}

#endif  // LAB_VIEWER_BINARY
