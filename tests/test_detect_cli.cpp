// `lab detect` as a user runs it (a subprocess): the acceptance check against the Ultralytics detections of
// bus.jpg (rect and square letterbox, reference executor), the outputs it writes, and its exit codes for bad
// input (an unreadable image among good ones, an empty folder, --imgsz not a multiple of 32, a bad --devices
// list), and that several forward workers (--devices) change nothing but the speed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/image/image.hpp"
#include "pipeline/safetensors.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kAssets = LAB_ASSETS_DIR;

using lab::test::contains;
using lab::test::LabResult;
using lab::test::quoted;
using lab::test::read_text;

// Runs `lab detect ARGS`.
LabResult run_detect(const std::string& args) {
  return lab::test::run_lab("detect " + args);
}

// Every golden detection matched by class with score within 0.01 and every coordinate within 1 px; same
// count.
void check_against_golden(const nlohmann::json& ours, const nlohmann::json& golden) {
  REQUIRE(ours.size() == golden.size());
  std::vector<bool> used(ours.size(), false);
  for (const auto& g : golden) {
    INFO("golden " << g.dump());
    bool matched = false;
    for (size_t i = 0; i < ours.size() && !matched; ++i) {
      const auto& d = ours[i];
      if (used[i] || d["class"] != g["cls"]) continue;
      bool close = std::fabs(d["score"].get<double>() - g["conf"].get<double>()) <= 0.01;
      for (int k = 0; k < 4; ++k)
        close = close && std::fabs(d["xyxy"][k].get<double>() - g["xyxy"][k].get<double>()) <= 1.0;
      if (close) used[i] = matched = true;
    }
    CHECK(matched);
  }
}

void run_bus_acceptance(const std::string& backend, const std::string& mode, const std::string& flags) {
  lab::test::ScratchDir dir("detect-bus-" + mode);
  const fs::path json = dir.path / "bus.json";
  const LabResult r =
      run_detect(quoted((kAssets / "images" / "bus.jpg").string()) + " --backend " + backend + " " + flags +
                 " --out " + quoted((dir.path / "runs").string()) + " --json " + quoted(json.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json ours = nlohmann::json::parse(read_text(json));
  const nlohmann::json golden = nlohmann::json::parse(read_text(kAssets / "goldens" / "bus_detections.json"));
  REQUIRE(ours["images"].size() == 1);
  CHECK(ours["backend"] == backend);
  check_against_golden(ours["images"][0]["detections"], golden["bus.jpg:" + mode]["dets"]);
  CHECK(fs::exists(dir.path / "runs" / "bus.jpg"));
  CHECK(
      contains(r.out, "bus.jpg: 640x" + std::string(mode == "rect" ? "480" : "640") + " 4 persons, 1 bus, "));
  CHECK(contains(r.out, "Speed: "));
}

}  // namespace

TEST_CASE("lab detect --backend reference reproduces the Ultralytics detections of bus.jpg", "[detect]") {
  if (!fs::exists(kAssets / "goldens" / "bus_detections.json")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  SECTION("rect letterbox (640x480)") {
    run_bus_acceptance("reference", "rect", "");
  }
  SECTION("square letterbox (640x640)") {
    run_bus_acceptance("reference", "square", "--square");
  }
}

TEST_CASE("lab detect --backend cuda reproduces the Ultralytics detections of bus.jpg", "[detect][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (!fs::exists(kAssets / "goldens" / "bus_detections.json")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  SECTION("rect letterbox (640x480)") {
    run_bus_acceptance("cuda", "rect", "");
  }
  SECTION("square letterbox (640x640)") {
    run_bus_acceptance("cuda", "square", "--square");
  }
}

TEST_CASE("lab detect skips an unreadable image, still writes the rest, and exits 1", "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-bad-image");
  lab::Image wide(640, 64, 200);  // a small forward: rect letterbox 640x64
  for (int x = 100; x < 300; ++x)
    for (int y = 10; y < 50; ++y) wide.pixel(x, y)[0] = 20;
  lab::write_image(wide, dir.path / "good.png");
  lab::test::write_file(dir.path / "broken.jpg", "not a jpeg at all");
  const fs::path json = dir.path / "out.json";
  const LabResult r =
      run_detect(quoted((dir.path / "broken.jpg").string()) + " " + quoted((dir.path / "good.png").string()) +
                 " --backend reference --imgsz 630 --save-txt --out " + quoted((dir.path / "runs").string()) +
                 " --json " + quoted(json.string()));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "broken.jpg"));
  CHECK(contains(r.err, "warning: --imgsz 630 is not a multiple of 32, using 640"));
  CHECK(contains(r.out, "good.png: 64x640 "));
  const nlohmann::json out = nlohmann::json::parse(read_text(json));
  CHECK(out["imgsz"] == 640);
  REQUIRE(out["images"].size() == 1);
  CHECK(out["images"][0]["shape"] == nlohmann::json({64, 640}));
  CHECK(fs::exists(dir.path / "runs" / "good.png"));
  CHECK(fs::exists(dir.path / "runs" / "labels" / "good.txt"));
  CHECK_FALSE(fs::exists(dir.path / "runs" / "broken.jpg"));
}

TEST_CASE("lab detect rejects an empty folder and bad options with exit 2", "[detect]") {
  lab::test::ScratchDir dir("detect-empty");
  fs::create_directories(dir.path / "empty");
  const LabResult empty = run_detect(quoted((dir.path / "empty").string()) + " --backend reference");
  CHECK(empty.exit_code == 2);
  CHECK(contains(empty.err, "no images"));
  CHECK(contains(empty.err, "empty"));

  const LabResult absent = run_detect(quoted((dir.path / "absent.jpg").string()));
  CHECK(absent.exit_code == 2);
  CHECK(contains(absent.err, "absent.jpg: no such file or directory"));

  const LabResult conf = run_detect(quoted((dir.path / "empty").string()) + " --conf 2");
  CHECK(conf.exit_code == 2);
  CHECK(contains(conf.err, "--conf"));

  lab::write_image(lab::Image(64, 48, 90),
                   dir.path / "small.png");  // a readable image, with or without assets
  const LabResult model = run_detect(quoted((dir.path / "small.png").string()) + " --model " +
                                     quoted((dir.path / "none.pt").string()));
  CHECK(model.exit_code == 2);
  CHECK(contains(model.err, "none.pt"));
}

TEST_CASE("lab detect --dump writes every tensor of the forward, one safetensors file per image",
          "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-dump");
  const LabResult r = run_detect(
      quoted((kAssets / "images" / "bus.jpg").string()) + " --backend reference --imgsz 320 --out " +
      quoted((dir.path / "runs").string()) + " --dump " + quoted((dir.path / "dump").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // bus.jpg (810x1080) letterboxed to the minimum rectangle at 320: 320 high, 256 wide; P5 is 10 x 8.
  const lab::SafetensorsFile dump = lab::SafetensorsFile::load(dir.path / "dump" / "bus.safetensors");
  CHECK(dump.info("input").shape == std::vector<int64_t>{1, 3, 320, 256});
  CHECK(dump.info("layer00").shape == std::vector<int64_t>{1, 16, 160, 128});
  CHECK(dump.info("layer22").shape == std::vector<int64_t>{1, 256, 10, 8});
  CHECK(dump.info("attn.model.10.m.0.attn").shape == std::vector<int64_t>{1, 2, 80, 80});
  CHECK(dump.info("attn.model.22.m.0.1.attn").shape == std::vector<int64_t>{1, 2, 80, 80});
  CHECK(dump.info("head.scores").shape == std::vector<int64_t>{1, 80, 1680});
  CHECK(dump.info("output").shape == std::vector<int64_t>{1, 300, 6});
  const std::vector<float> input = dump.floats("input");
  CHECK(std::all_of(input.begin(), input.end(), [](float v) { return v >= 0 && v <= 1; }));
}

namespace {

// The summary lines of `lab detect` ("<file>: <shape> <classes>, <ms>ms") without their times.
std::vector<std::string> summary_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (contains(line, ".png: ")) lines.push_back(line.substr(0, line.rfind(", ")));
  return lines;
}

nlohmann::json without_times(nlohmann::json images) {
  for (auto& image : images) image.erase("times_ms");
  return images;
}

}  // namespace

TEST_CASE("lab detect over several forward workers keeps the output of one: same detections, same order",
          "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-workers");
  const fs::path images = dir.path / "images";
  fs::create_directories(images);
  // Two letterbox shapes, so batches break where the shape changes, and an unreadable file in the middle.
  const lab::Image scene = lab::decode_image(fs::path(LAB_SOURCE_DIR) / "docs/viewer/scene.png");
  lab::Image wide(640, 200, 180);
  for (int x = 200; x < 400; ++x)
    for (int y = 40; y < 160; ++y) wide.pixel(x, y)[1] = 30;
  for (const char* name : {"a.png", "b.png", "d.png", "f.png", "g.png"})
    lab::write_image(scene, images / name);
  lab::write_image(wide, images / "c.png");
  lab::write_image(wide, images / "h.png");
  lab::test::write_file(images / "e.png", "not a png");

  const auto detect = [&](const std::string& name, const std::string& flags) {
    const LabResult r = run_detect(quoted(images.string()) + " --backend reference --imgsz 224 " + flags +
                                   " --out " + quoted((dir.path / name).string()) + " --json " +
                                   quoted((dir.path / (name + ".json")).string()));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);  // e.png
    CHECK(contains(r.err, "e.png"));
    CHECK(contains(r.out, "Throughput: 7 images in "));
    return std::make_pair(r, nlohmann::json::parse(read_text(dir.path / (name + ".json"))));
  };
  const auto [one, one_json] = detect("one", "--batch 1 --devices 0");
  const auto [three, three_json] = detect("three", "--batch 2 --devices 0,1,2");
  const std::vector<std::string> lines = summary_lines(one.out);
  REQUIRE(lines.size() == 7);
  CHECK(lines[0].rfind("a.png: ", 0) == 0);
  CHECK(summary_lines(three.out) == lines);
  REQUIRE(one_json["images"].size() == 7);
  CHECK(without_times(three_json["images"]) == without_times(one_json["images"]));
  for (const char* name : {"a.png", "c.png", "h.png"}) CHECK(fs::exists(dir.path / "three" / name));
  CHECK_FALSE(fs::exists(dir.path / "three" / "e.png"));
}

TEST_CASE("lab detect --devices rejects a malformed or repeated list with exit 2", "[detect]") {
  lab::test::ScratchDir dir("detect-devices");
  lab::write_image(lab::Image(64, 48, 90), dir.path / "small.png");
  for (const std::string bad : {"x", "0,0", "1,", "0;1"}) {
    const LabResult r =
        run_detect(quoted((dir.path / "small.png").string()) + " --backend reference --devices " +
                   quoted(bad) + " --out " + quoted((dir.path / "runs").string()));
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--devices " + bad));
    CHECK_FALSE(fs::exists(dir.path / "runs"));
  }
}
