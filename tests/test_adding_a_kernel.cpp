// docs/adding-a-kernel.md's example, letterbox_nchw, works as the doc says and the doc cannot drift from it:
// the runner passes against its reference and its scenario on cpu, the kernel reproduces the pipeline's own
// CPU pre-processing, a wrong struct and a broken rule fail with the lines the doc shows, every excerpt the
// doc marks as quoted is verbatim in its file, and the family is the three pieces the doc promises.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "kernels/detect/detect_decode_params.cuh"
#include "kernels/image/letterbox_nchw_params.cuh"
#include "kernels/runner.hpp"
#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/letterbox.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LAB_SOURCE_DIR;
const fs::path kDoc = kSource / "docs" / "adding-a-kernel.md";
// The example's files, as the doc names them.
const std::vector<std::string> kExampleFiles = {
    "kernels/image/letterbox_nchw.cu", "kernels/image/letterbox_nchw_params.cuh",
    "kernels/image/letterbox_nchw_runner.cpp", "scenarios/letterbox_nchw.toml"};

const Runner& example() {
  return Registry::instance().get("letterbox_nchw");
}

// The fenced blocks of `markdown` that follow a `<!-- verbatim: PATH -->` line, as (PATH, text) pairs.
std::vector<std::pair<std::string, std::string>> quoted_blocks(const std::string& markdown) {
  static const std::regex marker(R"(<!-- verbatim: (\S+) -->)");
  std::vector<std::pair<std::string, std::string>> blocks;
  std::istringstream lines(markdown);
  std::string line, path;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, marker)) {
      path = m[1];
      continue;
    }
    if (path.empty()) continue;
    REQUIRE(line.rfind("```", 0) == 0);  // the marker is followed by its block at once
    std::string text;
    while (std::getline(lines, line) && line.rfind("```", 0) != 0) text += line + "\n";
    blocks.emplace_back(path, text);
    path.clear();
  }
  return blocks;
}

}  // namespace

TEST_CASE("the adding-a-kernel example passes against its reference and its scenario on cpu", "[docs]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Params params = resolve_params(
      example(),
      {{"B", "2"}, {"SRC_H", "45"}, {"DST_W", "100"}, {"SRC_W", "77"}, {"DST_H", "64"}, {"BLOCK", "64"}});
  for (const KernelVariant& variant : example().variants()) {
    INFO(variant.name);
    auto instance = example().instantiate(*backend, variant.name, params, 7);
    instance->launch();
    for (const OutputCheck& c : instance->check(std::nullopt)) {
      INFO(c.output << ": rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs);
      CHECK(c.pass);
      CHECK(c.metrics.count == 2 * 3 * 64 * 100);
    }
    // Re-poisoned and run again: every element is written by the launch, none is left from before.
    instance->poison();
    instance->launch();
    for (const OutputCheck& c : instance->check(std::nullopt)) CHECK(c.pass);
  }

  BackendSet backends(test::embedded_context());
  const ScenarioPlan plan =
      plan_scenario(load_scenario(kSource / "scenarios" / "letterbox_nchw.toml"), "cpu");
  CHECK(plan.runs.size() == 8);  // 4 cases on cpu x 2 seeds (the batch-32 case is cuda only)
  for (const PlannedRun& run : plan.runs) {
    const RunResult r = execute_run(run, backends);
    INFO("case '" << run.case_name << "' seed " << run.seed << "\n" << r.error);
    CHECK(r.pass);
  }
}

TEST_CASE("the example kernel reproduces the pipeline's letterbox padding and NCHW conversion", "[docs]") {
  // A 640x427 image letterboxed for imgsz 640 (rect): no resize (ratio 1), 21 rows of padding split 10 / 11.
  Image image(640, 427);
  const std::vector<float> noise = random_uniform(image.rgb.size(), 0.0f, 255.0f, 11);
  std::ranges::transform(noise, image.rgb.begin(), [](float v) { return uint8_t(v); });
  const LetterboxGeometry g = letterbox_geometry(image.width, image.height, 640, true);
  REQUIRE((g.resized_width == 640 && g.resized_height == 427 && g.width == 640 && g.height == 448));
  CHECK(g.top == 10);
  CHECK(g.top == (g.height - g.resized_height) / 2);  // the runner's centring
  std::vector<float> expected;
  append_nchw(letterbox(image, g), expected);

  auto backend = make_backend("cpu", test::embedded_context());
  const Params params = resolve_params(example(), {{"SRC_H", "427"}, {"DST_H", "448"}});
  auto module = backend->compile(example().compile_request("v1_pixel", params));
  DeviceBuffer in = backend->upload_vector(image.rgb);
  DeviceBuffer out = backend->alloc(expected.size() * sizeof(float));
  const LetterboxNchwParams p{
      in.as<const unsigned char>(), out.as<float>(), 427, 640, 448, 640, g.top, g.left, 114};
  backend->launch(module->kernel("letterbox_nchw_v1_pixel"), {{448 * 640 / 256, 1, 1}, {256, 1, 1}},
                  kernel_params(p));
  backend->synchronize();
  CHECK(backend->download_vector<float>(out, expected.size()) == expected);
}

TEST_CASE("the example's wrong struct and broken rule fail with the lines the doc shows", "[docs]") {
  const std::string doc = test::read_text(kDoc);
  auto backend = make_backend("cpu", test::embedded_context());
  auto module = backend->compile(example().compile_request("v1_pixel", resolve_params(example(), {})));
  // DetectDecodeParams has the very size of LetterboxNchwParams: only the type tells them apart.
  REQUIRE(sizeof(DetectDecodeParams) == sizeof(LetterboxNchwParams));
  const std::string wrong =
      "kernel letterbox_nchw_v1_pixel takes lab::LetterboxNchwParams (48 bytes) but the launch passes "
      "DetectDecodeParams (48 bytes)";
  CHECK_THROWS_WITH(
      backend->launch(module->kernel("letterbox_nchw_v1_pixel"), {}, kernel_params(DetectDecodeParams{})),
      wrong);
  CHECK(test::contains(doc, wrong));
  const std::string rule =
      "parameter SRC_H=700 of letterbox_nchw is invalid: must be at most DST_H=640 (the image fits inside)";
  CHECK_THROWS_WITH(resolve_params(example(), {{"SRC_H", "700"}}), rule);
  CHECK(test::contains(doc, rule));
}

TEST_CASE("every excerpt docs/adding-a-kernel.md quotes is verbatim in its file", "[docs]") {
  const auto blocks = quoted_blocks(test::read_text(kDoc));
  std::map<std::string, int> quoted;
  for (const auto& [path, text] : blocks) {
    INFO("docs/adding-a-kernel.md quotes " << path << ":\n" << text);
    REQUIRE(fs::exists(kSource / path));
    CHECK(!text.empty());
    CHECK(test::contains(test::read_text(kSource / path), text));
    ++quoted[path];
  }
  for (const std::string& file : kExampleFiles) {
    INFO(file);
    CHECK(quoted[file] >= 1);
  }
}

TEST_CASE("the example family is three new pieces and nothing else names it", "[docs]") {
  std::set<std::string> family;
  for (const auto& entry : fs::directory_iterator(kSource / "kernels" / "image"))
    family.insert(fs::relative(entry.path(), kSource).generic_string());
  CHECK(family == std::set<std::string>{"kernels/image/letterbox_nchw.cu",
                                        "kernels/image/letterbox_nchw_params.cuh",
                                        "kernels/image/letterbox_nchw_runner.cpp"});
  CHECK(fs::is_regular_file(kSource / "scenarios" / "letterbox_nchw.toml"));
  // No registration list, CMake file or other code had to learn the name; the one user since, the training
  // pass's byte upload, finds the family through the runner registry.
  std::set<std::string> own(kExampleFiles.begin(), kExampleFiles.end());
  own.insert("pipeline/executor/pixel_input.cpp");
  for (const char* dir : {"kernels", "nvrtc_runtime", "lab", "pipeline", "viewer", "cmake", "scenarios"})
    for (const auto& entry : fs::recursive_directory_iterator(kSource / dir)) {
      const std::string path = fs::relative(entry.path(), kSource).generic_string();
      if (!entry.is_regular_file() || own.count(path)) continue;
      INFO(path);
      CHECK_FALSE(test::contains(test::read_text(entry.path()), "letterbox_nchw"));
    }
  CHECK_FALSE(test::contains(test::read_text(kSource / "CMakeLists.txt"), "letterbox_nchw"));
}
