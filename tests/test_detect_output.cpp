// Detection results as text and JSON (summary line, speed line, YOLO labels, the --json document), batching
// by letterboxed shape, the expansion of image arguments, and the output folder (numbering, stale labels).
#include <catch2/catch.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/detect/detections_output.hpp"
#include "pipeline/detect/batching.hpp"
#include "pipeline/detect/image_inputs.hpp"
#include "pipeline/detect/output_folder.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using namespace lab;

namespace {

ImageDetections bus_result() {
  ImageDetections r;
  r.file = "/data/images/bus.jpg";
  r.width = 810;
  r.height = 1080;
  r.geometry = letterbox_geometry(810, 1080, 640, true);
  r.times = {1.25, 3.14, 0.5};
  r.detections = {{5, "bus", 0.918f, 2.5f, 221.0f, 810.0f, 775.0f},
                  {0, "person", 0.906f, 51.0f, 398.0f, 239.0f, 905.0f},
                  {0, "person", 0.894f, 226.0f, 402.0f, 346.0f, 866.0f}};
  return r;
}

}  // namespace

TEST_CASE("summary and speed lines use the familiar form", "[detect]") {
  ImageDetections r = bus_result();
  CHECK(summary_line(r) == "bus.jpg: 640x480 2 persons, 1 bus, 3.1ms");
  r.detections.resize(1);
  CHECK(summary_line(r) == "bus.jpg: 640x480 1 bus, 3.1ms");
  r.detections.clear();
  CHECK(summary_line(r) == "bus.jpg: 640x480 (no detections), 3.1ms");

  ImageDetections other = bus_result();
  other.times = {0.75, 2.0, 0.25};
  other.batch = 2;
  CHECK(speed_line({bus_result(), other}) ==
        "Speed: 1.0ms pre-process, 2.6ms inference, 0.4ms post-process per image at shape (2, 3, 640, 480)");
}

TEST_CASE("YOLO label text is class cx cy w h score normalised to the source image", "[detect]") {
  ImageDetections r = bus_result();
  r.detections = {{5, "bus", 0.5f, 81.0f, 108.0f, 243.0f, 540.0f}};
  // cx = 162/810 = 0.2, cy = 324/1080 = 0.3, w = 162/810 = 0.2, h = 432/1080 = 0.4
  CHECK(yolo_label_text(r) == "5 0.2 0.3 0.2 0.4 0.5\n");
  r.detections.clear();
  CHECK(yolo_label_text(r).empty());
}

TEST_CASE("the detections JSON has the documented fields", "[detect]") {
  ImageDetections bus = bus_result();
  bus.file = "/data/./images//bus.jpg";
  DetectRunInfo run{"0.1.0", "./models//yolo26n.pt", "reference", "fp16", 640, 0.5f, false, {}};
  nlohmann::json j = detections_json(run, {bus});
  CHECK(j["lab_version"] == "0.1.0");
  CHECK(j["model"] == "models/yolo26n.pt");
  CHECK(j["backend"] == "reference");
  CHECK(j["precision"] == "fp16");
  CHECK(j["imgsz"] == 640);
  CHECK(j["conf"].get<double>() == Approx(0.5));
  CHECK(j["letterbox"] == "square");
  CHECK_FALSE(j.contains("classes"));
  run.rect = true;
  run.classes = {0, 5};
  const nlohmann::json filtered = detections_json(run, {bus});
  CHECK(filtered["letterbox"] == "rect");
  CHECK(filtered["classes"] == nlohmann::json({0, 5}));
  REQUIRE(j["images"].size() == 1);
  const auto& image = j["images"][0];
  CHECK(image["file"] == "/data/images/bus.jpg");
  CHECK(image["width"] == 810);
  CHECK(image["height"] == 1080);
  CHECK(image["shape"] == nlohmann::json({640, 480}));
  REQUIRE(image["detections"].size() == 3);
  CHECK(image["detections"][0]["class"] == 5);
  CHECK(image["detections"][0]["name"] == "bus");
  CHECK(image["detections"][0]["score"].get<double>() == Approx(0.918));
  CHECK(image["detections"][0]["xyxy"][2].get<double>() == Approx(810));
  CHECK(image["times_ms"]["inference"].get<double>() == Approx(3.14));
  CHECK(image["times_ms"].contains("preprocess"));
  CHECK(image["times_ms"].contains("postprocess"));
}

TEST_CASE("batches take consecutive images of one letterboxed shape up to --batch", "[detect]") {
  const LetterboxGeometry tall = letterbox_geometry(810, 1080, 640, true);
  const LetterboxGeometry wide = letterbox_geometry(1280, 720, 640, true);
  CHECK(joins_batch(tall, 1, tall, 2));
  CHECK_FALSE(joins_batch(tall, 2, tall, 2));  // full
  CHECK_FALSE(joins_batch(tall, 1, wide, 8));  // rect shapes differ with the aspect ratio
  CHECK_FALSE(joins_batch(tall, 1, tall, 1));
  const LetterboxGeometry a = letterbox_geometry(810, 1080, 640, false),
                          b = letterbox_geometry(1280, 720, 640, false);
  CHECK(joins_batch(a, 3, b, 4));  // square mode always batches
}

TEST_CASE("the batch shapes planned from image sizes are those the batching rule forms", "[detect]") {
  const ImageSize tall{810, 1080}, wide{1280, 720};
  // 3 tall, an unreadable file (no break), 2 tall, 1 wide, then 2 tall: at batch 2, tall batches of 2, 2, 1
  // and 2, and a wide batch of 1.
  const std::vector<std::optional<ImageSize>> sizes = {tall, tall, tall,  std::nullopt, tall,
                                                       tall, wide, tall, tall};
  CHECK(batch_shapes(sizes, 640, true, 2) ==
        std::vector<BatchShape>{{1, 384, 640}, {1, 640, 480}, {2, 640, 480}});
  CHECK(batch_shapes(sizes, 640, true, 1) == std::vector<BatchShape>{{1, 384, 640}, {1, 640, 480}});
  CHECK(batch_shapes(sizes, 640, false, 32) == std::vector<BatchShape>{{8, 640, 640}});  // square: one batch
  CHECK(batch_shapes({std::nullopt}, 640, true, 4).empty());
}

TEST_CASE("image arguments expand folders to their sorted image files", "[detect]") {
  test::ScratchDir dir("detect-inputs");
  for (const char* name : {"b.png", "a.JPG", "c.bmp", "notes.txt", "d.jpeg"})
    test::write_file(dir.path / name, "x");
  fs::create_directories(dir.path / "sub");
  test::write_file(dir.path / "sub" / "e.jpg", "x");
  const auto images = collect_images({dir.path});
  REQUIRE(images.size() == 4);
  CHECK(images[0].filename() == "a.JPG");
  CHECK(images[1].filename() == "b.png");
  CHECK(images[2].filename() == "c.bmp");
  CHECK(images[3].filename() == "d.jpeg");
  CHECK(collect_images({dir.path / "notes.txt"}).size() == 1);  // a file is taken as given
  CHECK_THROWS_WITH(collect_images({dir.path / "absent.jpg"}), Catch::Contains("absent.jpg: no such file"));
  fs::create_directories(dir.path / "empty");
  CHECK_THROWS_WITH(collect_images({dir.path / "empty"}), Catch::Contains("no images"));
}

TEST_CASE("output folders are numbered like yolo predict and a reused one loses stale labels", "[detect]") {
  test::ScratchDir dir("detect-folders");
  const fs::path runs = dir.path / "runs" / "detect";
  CHECK(claim_output_folder(runs, "predict", false) == runs / "predict");
  CHECK(claim_output_folder(runs, "predict", false) == runs / "predict2");
  test::write_file(runs / "predict3", "a file in the way");
  CHECK(claim_output_folder(runs, "predict", false) == runs / "predict4");
  CHECK(claim_output_folder(runs, "predict", true) == runs / "predict");
  CHECK(claim_output_folder(runs, "mine", true) == runs / "mine");
  CHECK(fs::is_directory(runs / "mine"));

  const fs::path labels = runs / "predict" / "labels";
  for (const char* name : {"a.txt", "b.txt", "c.txt", "notes.md"}) test::write_file(labels / name, "0 0.5\n");
  CHECK(remove_stale_labels(labels, {"a.txt", "c.txt"}) == 1);
  CHECK(fs::exists(labels / "a.txt"));
  CHECK_FALSE(fs::exists(labels / "b.txt"));
  CHECK(fs::exists(labels / "notes.md"));  // only label files are ours to remove
  CHECK(remove_stale_labels(labels, {}) == 2);
  CHECK(fs::exists(labels / "notes.md"));
  fs::remove(labels / "notes.md");
  CHECK(remove_stale_labels(labels, {}) == 0);
  CHECK_FALSE(fs::exists(labels));  // an emptied labels folder goes too
}
