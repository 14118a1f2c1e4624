// COCO JSON documents of ImageEval lists and the run of tests/reference_metrics.py.
#include "tests/reference_metrics_support.hpp"

#include <catch2/catch.hpp>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/test_helpers.hpp"

namespace lab::test {

ReferenceMetrics reference_metrics(const std::vector<metrics::ImageEval>& images,
                                   const std::filesystem::path& dir) {
  nlohmann::json gt = {{"images", nlohmann::json::array()},
                       {"annotations", nlohmann::json::array()},
                       {"categories", nlohmann::json::array()}};
  nlohmann::json dt = nlohmann::json::array();
  std::set<int> classes;
  int annotation = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const int image_id = int(i) + 1;  // COCO ids from 1 (an annotation id 0 would read as "unmatched")
    gt["images"].push_back({{"id", image_id}});
    for (const metrics::GroundTruth& g : images[i].truths) {
      const auto box = metrics::coco_xywh(g.box);
      gt["annotations"].push_back({{"id", ++annotation},
                                   {"image_id", image_id},
                                   {"category_id", g.cls + 1},
                                   {"bbox", box},
                                   {"area", box[2] * box[3]},
                                   {"iscrowd", 0}});
      classes.insert(g.cls);
    }
    for (const metrics::Prediction& p : images[i].predictions)
      dt.push_back({{"image_id", image_id},
                    {"category_id", p.cls + 1},
                    {"bbox", metrics::coco_xywh(p.box)},
                    {"score", p.score}});
  }
  for (int cls : classes) gt["categories"].push_back({{"id", cls + 1}, {"name", std::to_string(cls)}});
  write_file(dir / "gt.json", gt.dump());
  write_file(dir / "dt.json", dt.dump());
  const LabResult run =
      run_command("PYTHONPATH=" + quoted(LAB_PYCOCOTOOLS_DIR) + " python3 " +
                  quoted(std::string(LAB_SOURCE_DIR) + "/tests/reference_metrics.py") + " " +
                  quoted((dir / "gt.json").string()) + " " + quoted((dir / "dt.json").string()));
  INFO(
      "tests/reference_metrics.py (scripts/install-deps.sh installs pycocotools and numpy "
      "into " LAB_PYCOCOTOOLS_DIR "): "
      << run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json out = nlohmann::json::parse(run.out);
  ReferenceMetrics reference;
  reference.coco = {out.at("coco").at("map50_95").get<double>(), out.at("coco").at("map50").get<double>()};
  const nlohmann::json& u = out.at("ultralytics");
  reference.ultralytics.precision = u.at("precision").get<double>();
  reference.ultralytics.recall = u.at("recall").get<double>();
  reference.ultralytics.map50 = u.at("map50").get<double>();
  reference.ultralytics.map50_95 = u.at("map50_95").get<double>();
  for (const nlohmann::json& c : u.at("classes")) {
    metrics::ClassMetrics row;
    row.cls = c.at("category_id").get<int>() - 1;
    row.precision = c.at("precision").get<double>();
    row.recall = c.at("recall").get<double>();
    row.map50 = c.at("map50").get<double>();
    row.map50_95 = c.at("map50_95").get<double>();
    reference.ultralytics.classes.push_back(row);
  }
  return reference;
}

}  // namespace lab::test
