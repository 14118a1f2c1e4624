// `lab val` end to end: a tiny `lab data synth` dataset on the cpu backend (our kernels) with a corrupt image
// and a corrupt label file among good ones, and bus.jpg with its five labels on the reference forward. The
// JSON's metrics are recomputed from its own predictions and the dataset's labels by the metric code, and
// (bus) by pycocotools and the numpy transcription of Ultralytics' formulas (tests/reference_metrics.py).
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/val/validator.hpp"
#include "tests/reference_metrics_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using lab::test::contains;
using lab::test::quoted;
using lab::test::ScratchDir;
using lab::test::write_file;
namespace fs = std::filesystem;

namespace {

const fs::path kModel = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";

// The images of a `lab val --json` document with their detections, paired with the dataset's labels.
std::vector<metrics::ImageEval> evals_of(const nlohmann::json& document, const dataset::Split& split) {
  std::vector<metrics::ImageEval> evals;
  for (const nlohmann::json& image : document.at("images")) {
    const fs::path file = fs::path(image.at("file").get<std::string>()).lexically_normal();
    const auto sample =
        std::find_if(split.samples.begin(), split.samples.end(),
                     [&](const dataset::Sample& s) { return s.image.lexically_normal() == file; });
    REQUIRE(sample != split.samples.end());
    metrics::ImageEval eval;
    for (const nlohmann::json& d : image.at("detections")) {
      const auto xyxy = d.at("xyxy").get<std::vector<double>>();
      eval.predictions.push_back(
          {{xyxy[0], xyxy[1], xyxy[2], xyxy[3]}, d.at("score").get<double>(), d.at("class").get<int>()});
    }
    eval.truths =
        val::truths_in_pixels(sample->labels, image.at("width").get<int>(), image.at("height").get<int>());
    evals.push_back(std::move(eval));
  }
  return evals;
}

void check_metrics_match(const nlohmann::json& document, const metrics::DetectionMetrics& m,
                         const metrics::CocoSummary& coco, double margin) {
  const nlohmann::json& overall = document.at("metrics");
  CHECK(overall.at("precision").get<double>() == Approx(m.precision).margin(margin));
  CHECK(overall.at("recall").get<double>() == Approx(m.recall).margin(margin));
  CHECK(overall.at("map50").get<double>() == Approx(m.map50).margin(margin));
  CHECK(overall.at("map50_95").get<double>() == Approx(m.map50_95).margin(margin));
  CHECK(document.at("coco").at("map50_95").get<double>() == Approx(coco.map50_95).margin(margin));
  CHECK(document.at("coco").at("map50").get<double>() == Approx(coco.map50).margin(margin));
  REQUIRE(document.at("classes").size() == m.classes.size());
  for (size_t c = 0; c < m.classes.size(); ++c) {
    const nlohmann::json& row = document.at("classes")[c];
    CHECK(row.at("class").get<int>() == m.classes[c].cls);
    CHECK(row.at("precision").get<double>() == Approx(m.classes[c].precision).margin(margin));
    CHECK(row.at("recall").get<double>() == Approx(m.classes[c].recall).margin(margin));
    CHECK(row.at("map50").get<double>() == Approx(m.classes[c].map50).margin(margin));
    CHECK(row.at("map50_95").get<double>() == Approx(m.classes[c].map50_95).margin(margin));
  }
}

bool bus_assets_present() {
  if (fs::exists(kModel) && fs::exists(fs::path(LAB_ASSETS_DIR) / "images" / "bus.jpg")) return true;
  WARN("skipped: the shared assets are absent");
  return false;
}

// bus.jpg with its five labels, zidane.jpg without a label file, `nc: 80`.
void make_bus_dataset(const fs::path& root) {
  fs::create_directories(root / "images" / "val");
  fs::create_directories(root / "labels" / "val");
  for (const char* image : {"bus.jpg", "zidane.jpg"})
    fs::copy_file(fs::path(LAB_ASSETS_DIR) / "images" / image, root / "images" / "val" / image);
  fs::copy_file(fs::path(LAB_ASSETS_DIR) / "goldens" / "bus_labels.txt", root / "labels" / "val" / "bus.txt");
  write_file(root / "data.yaml", "val: images/val\nnc: 80\n");
}

// `lab val` on the bus dataset (make_bus_dataset) in `root` on `backend`: its JSON document, after checking
// the summary line and that the JSON's numbers are the metric code's on the JSON's own predictions.
nlohmann::json bus_val(const fs::path& root, const std::string& backend) {
  const fs::path json = root / ("val-" + backend + ".json");
  const lab::test::LabResult r = lab::test::run_lab("val " + quoted((root / "data.yaml").string()) +
                                                    " --model " + quoted(kModel.string()) + " --backend " +
                                                    backend + " --imgsz 320 --json " + quoted(json.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out,
                 "val: 2 images, 1 labelled, 1 background (1 no label file, 0 empty label files), "
                 "0 corrupt skipped\n"));
  const nlohmann::json document = nlohmann::json::parse(lab::test::read_text(json));
  CHECK(document.at("backend") == backend);
  // fp32: auto runs the NHWC network on a GPU (3xTF32 in hardware), NCHW on the emulator and the reference.
  const std::string layout = backend == "cuda" ? "nhwc" : "nchw";
  CHECK(document.at("layout") == layout);
  if (backend != "reference") CHECK(contains(r.out, "imgsz 320 rect, layout " + layout + "\n"));
  REQUIRE(document.at("classes").size() == 2);
  CHECK(document.at("classes")[0].at("name") == "class0");
  CHECK(document.at("classes")[1].at("instances") == 1);
  const dataset::Split split = dataset::read_split(dataset::read_data_yaml(root / "data.yaml"), "val");
  const std::vector<metrics::ImageEval> evals = evals_of(document, split);
  check_metrics_match(document, metrics::ultralytics_metrics(evals), metrics::coco_map(evals), 1e-12);
  return document;
}

}  // namespace

TEST_CASE("lab val on a synthetic dataset, cpu backend: table, JSON rows per class, corrupt files counted",
          "[val][cli]") {
  if (!fs::exists(kModel)) {
    WARN("skipped: " << kModel.string() << " is absent");
    return;
  }
  ScratchDir dir("val-synth");
  REQUIRE(lab::test::run_lab("data synth " + quoted((dir.path / "shapes").string()) +
                             " --classes 3 --train 0 --val 8 --imgsz 128 --seed 5")
              .exit_code == 0);
  write_file(dir.path / "shapes/images/val/broken.jpg", "\xff\xd8\xff not really a JPEG");
  write_file(dir.path / "shapes/labels/val/broken.txt", "0 0.5 0.5 0.1 0.1\n");
  write_file(dir.path / "shapes/labels/val/000007.txt", "0 0.5 0.5 0.1\n");  // now a corrupt label file

  const fs::path json = dir.path / "val.json";
  const lab::test::LabResult r = lab::test::run_lab(
      "val " + quoted((dir.path / "shapes/data.yaml").string()) + " --model " + quoted(kModel.string()) +
      " --backend cpu --imgsz 64 --batch 8 --json " + quoted(json.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out,
                 "val: 9 images, 7 labelled, 0 background (0 no label file, 0 empty label files), "
                 "2 corrupt skipped\n"));
  CHECK(contains(r.out,
                 "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95)\n"
                 "                   all          7 "));
  CHECK(contains(r.err, "000007.txt:1: expected 'class cx cy w h' (5 numbers)"));
  CHECK(contains(r.err, "broken.jpg: cannot read image"));
  CHECK(contains(r.err, "lab: warning: the model has 80 classes, the dataset 3"));

  const nlohmann::json document = nlohmann::json::parse(lab::test::read_text(json));
  CHECK(document.at("backend") == "cpu");
  CHECK(document.at("dataset").at("corrupt") == 2);
  CHECK(document.at("images").size() == 7);
  const dataset::Split split =
      dataset::read_split(dataset::read_data_yaml(dir.path / "shapes/data.yaml"), "val");
  const std::vector<metrics::ImageEval> evals = evals_of(document, split);
  size_t instances = 0, predictions = 0;
  for (const metrics::ImageEval& e : evals) instances += e.truths.size(), predictions += e.predictions.size();
  CHECK(document.at("metrics").at("instances") == instances);
  CHECK(predictions > 0);  // conf 0.001 keeps the network's low scores
  for (const nlohmann::json& row : document.at("classes")) {
    CHECK(contains(r.out, row.at("name").get<std::string>() + "          "));
    CHECK(row.at("instances").get<size_t>() > 0);
  }
  check_metrics_match(document, metrics::ultralytics_metrics(evals), metrics::coco_map(evals), 1e-12);
}

TEST_CASE("lab val on bus.jpg and its labels: the numbers of pycocotools and Ultralytics' formulas",
          "[val][cli]") {
  if (!bus_assets_present()) return;
  ScratchDir dir("val-bus");
  make_bus_dataset(dir.path);
  const nlohmann::json document = bus_val(dir.path, "reference");
  const dataset::Split split = dataset::read_split(dataset::read_data_yaml(dir.path / "data.yaml"), "val");
  const lab::test::ReferenceMetrics reference =
      lab::test::reference_metrics(evals_of(document, split), dir.path);
  INFO("COCO " << reference.coco.map50_95 << ", Ultralytics " << reference.ultralytics.map50_95);
  CHECK(reference.coco.map50 > 0.5);  // the persons and the bus are found
  check_metrics_match(document, reference.ultralytics, reference.coco, 1e-9);
}

// The GPU machine has no pycocotools: the cuda run is checked against the metric code on its own predictions
// (in bus_val) and against the reference forward's numbers (fp32 kernels against float64: the same boxes to
// a fraction of a pixel, so the same matches).
TEST_CASE("lab val --backend cuda on bus.jpg: the reference forward's numbers", "[val][cli][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (!bus_assets_present()) return;
  ScratchDir dir("val-bus-cuda");
  make_bus_dataset(dir.path);
  const nlohmann::json cuda = bus_val(dir.path, "cuda");
  const nlohmann::json reference = bus_val(dir.path, "reference");
  for (const char* key : {"precision", "recall", "map50", "map50_95"})
    CHECK(cuda.at("metrics").at(key).get<double>() ==
          Approx(reference.at("metrics").at(key).get<double>()).margin(0.01));
  CHECK(cuda.at("coco").at("map50_95").get<double>() ==
        Approx(reference.at("coco").at("map50_95").get<double>()).margin(0.01));
}

TEST_CASE("lab val: a missing YAML or split, or a split of corrupt images only, is one line, exit 2, no JSON",
          "[val][cli]") {
  ScratchDir dir("val-bad");
  const fs::path json = dir.path / "out.json";
  const auto val = [&](const fs::path& yaml) {
    return lab::test::run_lab("val " + quoted(yaml.string()) + " --model " + quoted(kModel.string()) +
                              " --backend reference --imgsz 64 --json " + quoted(json.string()));
  };
  const lab::test::LabResult missing = val(dir.path / "absent.yaml");
  CHECK(missing.exit_code == 2);
  CHECK(missing.err ==
        "lab: " + (dir.path / "absent.yaml").string() + ": cannot read dataset YAML (no such file)\n");
  write_file(dir.path / "train_only.yaml", "train: images/train\nnames: [a]\n");
  const lab::test::LabResult no_val = val(dir.path / "train_only.yaml");
  CHECK(no_val.exit_code == 2);
  CHECK(no_val.err == "lab: " + (dir.path / "train_only.yaml").string() + ": no 'val' split\n");
  fs::create_directories(dir.path / "images" / "val");
  fs::create_directories(dir.path / "labels" / "val");
  write_file(dir.path / "images" / "val" / "a.jpg", "not an image");
  write_file(dir.path / "labels" / "val" / "a.txt", "4 0.5 0.5 0.1 0.1\n");
  write_file(dir.path / "data.yaml", "val: images/val\nnames: [a]\n");
  const lab::test::LabResult corrupt = val(dir.path / "data.yaml");
  CHECK(corrupt.exit_code == 2);
  CHECK(contains(corrupt.err,
                 "a.txt:1: class 4 is beyond the dataset's 1 classes (0 to 0) (corrupt: image skipped)\n"));
  CHECK(contains(corrupt.err, "lab: " + (dir.path / "data.yaml").string() +
                                  ": no usable image in split 'val' (1 images, "));
  CHECK_FALSE(fs::exists(json));
}

TEST_CASE("lab val --devices 0,1 on the reference forward: two forward workers, the numbers of one",
          "[val][cli]") {
  if (!bus_assets_present()) return;
  ScratchDir dir("val-workers");
  make_bus_dataset(dir.path);
  std::vector<nlohmann::json> documents;
  for (const std::string devices : {"0", "0,1"}) {
    const fs::path json = dir.path / ("val" + devices + ".json");
    const lab::test::LabResult r = lab::test::run_lab(
        "val " + quoted((dir.path / "data.yaml").string()) + " --model " + quoted(kModel.string()) +
        " --backend reference --imgsz 160 --devices " + devices + " --json " + quoted(json.string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "2 forward workers") == (devices == "0,1"));
    documents.push_back(nlohmann::json::parse(lab::test::read_text(json)));
  }
  CHECK(documents[0].at("metrics") == documents[1].at("metrics"));
  CHECK(documents[0].at("classes") == documents[1].at("classes"));
  CHECK(documents[0].at("coco") == documents[1].at("coco"));
  for (size_t i = 0; i < 2; ++i)
    CHECK(documents[0].at("images")[i].at("detections") == documents[1].at("images")[i].at("detections"));
}
