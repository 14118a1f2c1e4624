// `lab detect` as a user runs it (a subprocess): the acceptance check against the Ultralytics detections of
// bus.jpg (rect and square letterbox, reference executor), the outputs it writes, and its exit codes for bad
// input (an unreadable image among good ones, an empty folder, --imgsz not a multiple of 32, a bad --devices
// list, empty / directory / FIFO / looping paths, sizes over the limits), that several forward workers
// (--devices) change nothing but the speed, the output folders (runs/detect/predict[N], --exist-ok without
// stale labels, --nosave), `--json -` and --classes, and the cpu backend for --precision fp16 without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/image/image.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/detect_json.hpp"
#include "tests/test_helpers.hpp"

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

  const LabResult layout = run_detect(quoted((dir.path / "small.png").string()) + " --layout nhcw");
  CHECK(layout.exit_code == 2);
  CHECK(contains(layout.err, "--layout"));
  // NHWC activations on the float64 reference forward: one line naming the option, no output folder.
  const fs::path shared_model = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  if (fs::exists(shared_model)) {
    const LabResult reference = run_detect(quoted((dir.path / "small.png").string()) +
                                           " --backend reference --model " + quoted(shared_model.string()) +
                                           " --layout nhwc --out " + quoted((dir.path / "runs").string()));
    CHECK(reference.exit_code == 2);
    CHECK(reference.err ==
          "lab: --layout nhwc needs a kernel backend (cuda or cpu): the reference forward is float64 NCHW\n");
    CHECK_FALSE(fs::exists(dir.path / "runs"));
  }
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
  CHECK(lab::test::without_times(three_json["images"]) == lab::test::without_times(one_json["images"]));
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

namespace {

// Runs the test body with `dir` as the working directory (lab detect writes runs/detect/... there).
struct WorkingDirectory {
  explicit WorkingDirectory(const fs::path& dir) : previous(fs::current_path()) { fs::current_path(dir); }
  ~WorkingDirectory() { fs::current_path(previous); }
  fs::path previous;
};

}  // namespace

TEST_CASE("lab detect writes runs/detect/predict, then predict2, --exist-ok reuses it without stale labels",
          "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-predict");
  lab::write_image(lab::Image(64, 48, 90), dir.path / "first.png");
  lab::write_image(lab::Image(64, 48, 160), dir.path / "second.png");
  const WorkingDirectory cwd(dir.path);
  const std::string flags = " --backend reference --imgsz 64";
  const fs::path predict = fs::path("runs") / "detect" / "predict";

  const LabResult r1 = run_detect("first.png --save-txt" + flags);
  INFO(r1.out << r1.err);
  REQUIRE(r1.exit_code == 0);
  CHECK(contains(r1.out, "Results saved to runs/detect/predict, 1 label files"));
  CHECK(fs::exists(predict / "first.png"));
  CHECK(fs::exists(predict / "labels" / "first.txt"));

  const LabResult r2 = run_detect("first.png" + flags);
  REQUIRE(r2.exit_code == 0);
  CHECK(contains(r2.out, "Results saved to runs/detect/predict2\n"));
  CHECK(fs::exists(fs::path("runs") / "detect" / "predict2" / "first.png"));

  // Into the first folder again, with another image: first.txt is from the earlier run and must go.
  const LabResult r3 = run_detect("second.png --save-txt --exist-ok" + flags);
  REQUIRE(r3.exit_code == 0);
  CHECK(contains(r3.out, "Results saved to runs/detect/predict, 1 label files"));
  CHECK(fs::exists(predict / "labels" / "second.txt"));
  CHECK_FALSE(fs::exists(predict / "labels" / "first.txt"));

  // --nosave without --save-txt: no annotated image, and no label file of an earlier run is left.
  const LabResult r4 = run_detect("second.png --name mine --nosave" + flags);
  REQUIRE(r4.exit_code == 0);
  CHECK(fs::is_directory(fs::path("runs") / "detect" / "mine"));
  CHECK(fs::is_empty(fs::path("runs") / "detect" / "mine"));
  const LabResult r5 = run_detect("first.png --exist-ok --nosave" + flags);
  REQUIRE(r5.exit_code == 0);
  CHECK_FALSE(fs::exists(predict / "labels"));

  const LabResult both = run_detect("first.png --name x --out y" + flags);
  CHECK(both.exit_code == 2);
}

TEST_CASE("lab detect --json - writes the JSON to stdout with the run's settings, --classes filters",
          "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-json-stdout");
  const fs::path image = kAssets / "images" / "." / "bus.jpg";  // the JSON names it without the "/./"
  const LabResult r = run_detect(quoted(image.string()) +
                                 " --backend reference --imgsz 320 --classes 0 "
                                 "--json - --nosave --out " +
                                 quoted((dir.path / "runs").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);  // stdout is the JSON document alone
  CHECK(contains(r.err, "bus.jpg: 320x256 "));            // the lines for people went to stderr
  CHECK(j["lab_version"] == "0.1.0");
  CHECK(j["backend"] == "reference");
  CHECK(j["precision"] == "fp32");
  CHECK(j["layout"] == "nchw");
  CHECK(j["imgsz"] == 320);
  CHECK(j["conf"].get<double>() == Approx(0.25));
  CHECK(j["letterbox"] == "rect");
  CHECK(j["classes"] == nlohmann::json({0}));
  CHECK(j["model"] == (kAssets / "models" / "yolo26n.pt").lexically_normal().string());
  REQUIRE(j["images"].size() == 1);
  CHECK(j["images"][0]["file"] == (kAssets / "images" / "bus.jpg").lexically_normal().string());
  const nlohmann::json& detections = j["images"][0]["detections"];
  CHECK(detections.size() >= 2);  // the persons; the bus (class 5) is filtered out
  for (const auto& d : detections) CHECK(d["class"] == 0);
  CHECK_FALSE(fs::exists(dir.path / "-"));
  CHECK_FALSE(fs::exists(dir.path / "runs" / "bus.jpg"));  // --nosave

  const LabResult unknown = run_detect(quoted(image.string()) + " --backend reference --classes 80 --out " +
                                       quoted((dir.path / "runs").string()));
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err == "lab: --classes 80: the model has classes 0 to 79\n");
}

TEST_CASE(
    "lab detect: empty, directory, FIFO and symlink-loop paths and oversized inputs are one-line errors",
    "[detect]") {
  lab::test::ScratchDir dir("detect-edges");
  const fs::path image = dir.path / "small.png";
  lab::write_image(lab::Image(64, 48, 90), image);
  const std::string out = " --backend reference --out " + quoted((dir.path / "runs").string());
  const auto expect = [&](const std::string& args, const std::string& message) {
    const LabResult r = run_detect(args + out);
    INFO("lab detect " << args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err == message);
  };
  expect(quoted(image.string()) + " --model ''", "lab: --model: must not be empty\n");
  fs::create_directories(dir.path / "models.d");
  expect(quoted(image.string()) + " --model " + quoted((dir.path / "models.d").string()),
         "lab: --model " + (dir.path / "models.d").string() + ": is a folder, not a checkpoint file\n");
  REQUIRE(::mkfifo((dir.path / "model.fifo").c_str(), 0600) == 0);
  expect(quoted(image.string()) + " --model " + quoted((dir.path / "model.fifo").string()),
         "lab: --model " + (dir.path / "model.fifo").string() + ": is a FIFO, not a checkpoint file\n");
  fs::create_symlink(dir.path / "loop.jpg", dir.path / "loop.jpg");
  expect(quoted((dir.path / "loop.jpg").string()),
         "lab: " + (dir.path / "loop.jpg").string() + ": Too many levels of symbolic links\n");
  expect(quoted(image.string()) + " --batch 1024 --imgsz 640",
         "lab: --batch 1024 at --imgsz 640 is 419430400 pixels per forward; the limit is 104857600 (256 "
         "images of 640x640)\n");
  CHECK_FALSE(fs::exists(dir.path / "runs"));
  const LabResult bench = lab::test::run_lab("bench pipeline --model ''");
  CHECK(bench.exit_code == 2);
  CHECK(bench.err == "lab: --model: must not be empty\n");
}

TEST_CASE("without a GPU, lab detect --precision fp16 runs on the cpu backend", "[detect]") {
  if (lab::cuda_device_present()) {
    WARN("skipped: this machine has a CUDA device (auto picks cuda)");
    return;
  }
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-auto-fp16");
  lab::write_image(lab::Image(64, 48, 90), dir.path / "small.png");
  const LabResult r =
      run_detect(quoted((dir.path / "small.png").string()) + " --precision fp16 --imgsz 64 --out " +
                 quoted((dir.path / "runs").string()));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "backend cpu (auto: no CUDA device, and --precision fp16 needs our kernels)"));
}

TEST_CASE(
    "lab detect on a folder with our kernels: batch 2 through the staging slots gives batch 1's detections "
    "and files, --verbose prints the stage profile",
    "[detect]") {
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-staging");
  const fs::path images = dir.path / "images";
  fs::create_directories(images);
  // Two bus images (one rect shape) and zidane (another): at batch 2 one batch of two and one of one.
  fs::copy_file(kAssets / "images" / "bus.jpg", images / "a_bus.jpg");
  fs::copy_file(kAssets / "images" / "bus.jpg", images / "b_bus.jpg");
  fs::copy_file(kAssets / "images" / "zidane.jpg", images / "c_zidane.jpg");
  const auto detect = [&](const std::string& name, const std::string& flags) {
    const LabResult r = run_detect(quoted(images.string()) + " --backend cpu --imgsz 128 --conf 0.1 " +
                                   flags + " --out " + quoted((dir.path / name).string()) + " --json " +
                                   quoted((dir.path / (name + ".json")).string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // Both runs form two batch shapes (128x96 for the bus, 96x128 for zidane), built before the clock.
    CHECK(contains(r.out, "Throughput: 3 images in "));
    CHECK(contains(r.out, "of set-up: detectors and 2 forward plans built ahead)"));
    return std::make_pair(r, nlohmann::json::parse(read_text(dir.path / (name + ".json"))));
  };
  const auto [one, one_json] = detect("one", "--batch 1");
  const auto [two, two_json] = detect("two", "--batch 2 --verbose");
  REQUIRE(one_json["images"].size() == 3);
  REQUIRE(two_json["images"].size() == 3);
  size_t detections = 0;
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& a = one_json["images"][i];
    const nlohmann::json& b = two_json["images"][i];
    CHECK(b["file"] == a["file"]);
    CHECK(b["detections"] == a["detections"]);
    detections += a["detections"].size();
    const std::string file = fs::path(a["file"].get<std::string>()).filename().string();
    CHECK(read_text(dir.path / "two" / file) == read_text(dir.path / "one" / file));
  }
  CHECK(detections > 0);
  CHECK_FALSE(contains(one.out, "Stages ("));
  for (const char* stage :
       {"decode ", "letterbox ", "draw ", "encode ", "write ", "upload ", "forward ", "top-k "})
    CHECK(contains(two.out, stage));
  CHECK(contains(two.out, "critical: "));
}
