// checkpoint_of (pipeline/train/model_checkpoint.hpp): yolo26n with every checkpoint parameter perturbed
// deterministically goes model -> checkpoint -> safetensors -> load -> model with bit-identical parameters
// and the same reference forward; a re-initialised class count changes nc, names, yaml and the class convs'
// shapes; `lab detect` and `lab val` load the .safetensors and .pt save_trained_weights writes.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/network.hpp"
#include "pipeline/train/class_reinit.hpp"
#include "pipeline/train/model_checkpoint.hpp"
#include "tests/checkpoint_test_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

std::vector<const ConvSpec*> convs_of(const Yolo26Model& model) {
  std::vector<const ConvSpec*> convs;
  for_each_conv(model, [&convs](const ConvSpec& conv) { convs.push_back(&conv); });
  return convs;
}

void check_same_parameters(const Yolo26Model& a, const Yolo26Model& b) {
  const std::vector<const ConvSpec*> left = convs_of(a), right = convs_of(b);
  REQUIRE(left.size() == right.size());
  for (size_t i = 0; i < left.size(); ++i) {
    const ConvSpec& x = *left[i];
    const ConvSpec& y = *right[i];
    CAPTURE(x.name);
    REQUIRE(x.name == y.name);
    CHECK(x.weight == y.weight);
    CHECK(x.bias == y.bias);
    CHECK(x.conv_weight == y.conv_weight);
    REQUIRE(x.bn.has_value() == y.bn.has_value());
    if (!x.bn) continue;
    CHECK(x.bn->gamma == y.bn->gamma);
    CHECK(x.bn->beta == y.bn->beta);
    CHECK(x.bn->mean == y.bn->mean);
    CHECK(x.bn->var == y.bn->var);
  }
}

const Checkpoint& yolo26n() {
  static const Checkpoint checkpoint = load_checkpoint(test::yolo26n_checkpoint());
  return checkpoint;
}

}  // namespace

TEST_CASE("checkpoint_of: perturbed yolo26n -> safetensors -> model is bit-identical with the same forward",
          "[checkpoint][model]") {
  if (test::yolo26n_checkpoint().empty()) return;
  const Checkpoint& base = yolo26n();
  Yolo26Model trained = Yolo26Model::from_checkpoint(base);
  test::perturb_parameters(trained);

  const Checkpoint written = train::checkpoint_of(trained, base);
  test::ScratchDir dir("model-checkpoint");
  const fs::path file = dir.path / "last.safetensors";
  save_checkpoint_safetensors(written, file);
  const Checkpoint loaded = load_checkpoint(file);
  CHECK(loaded.nc == 80);
  CHECK(loaded.class_names == base.class_names);
  CHECK(loaded.scale == "n");

  // Every base tensor is there; the model's are float32 and differ from the base, the others are unchanged.
  size_t changed = 0;
  for (const auto& [key, tensor] : base.state_dict) {
    CAPTURE(key);
    REQUIRE(loaded.contains(key));
    const HostTensor& now = loaded.tensor(key);
    CHECK(now.shape == tensor.shape);
    CHECK(now.stored_dtype == "F32");
    if (now.values != tensor.values) ++changed;
  }
  CHECK(loaded.state_dict.size() == base.state_dict.size());
  // Running statistics are kept (the perturbation leaves them alone): the parameters are what changed.
  size_t parameters = 0;
  for_each_conv(trained, [&parameters](ConvSpec& conv) { parameters += conv_parameters(conv).size(); });
  CHECK(changed == parameters);

  const Yolo26Model reloaded = Yolo26Model::from_checkpoint(loaded);
  check_same_parameters(trained, reloaded);

  const int side = 64;
  std::vector<float> input(size_t(3) * side * side);
  for (size_t i = 0; i < input.size(); ++i) input[i] = float(0.5 + 0.5 * std::sin(0.013 * double(i)));
  const auto before = make_reference_network(trained);
  const auto after = make_reference_network(reloaded);
  before->forward(input.data(), 1, side, side);
  after->forward(input.data(), 1, side, side);
  for (const std::string name : {"head.boxes", "head.scores", "head.one2many.scores", "output"}) {
    CAPTURE(name);
    CHECK(before->tensor(name).values == after->tensor(name).values);
  }
}

TEST_CASE("checkpoint_of: a re-initialised class count changes nc, names, yaml nc and the class convs",
          "[checkpoint][model]") {
  if (test::yolo26n_checkpoint().empty()) return;
  const Checkpoint& base = yolo26n();
  Yolo26Model trained = Yolo26Model::from_checkpoint(base);
  train::adopt_classes(trained, {"circle", "square"}, 5);  // what lab train does for a 2-class dataset
  REQUIRE(trained.nc == 2);

  const Checkpoint written = train::checkpoint_of(trained, base);
  CHECK(written.nc == 2);
  CHECK(written.class_names == std::vector<std::string>{"circle", "square"});
  CHECK(nlohmann::json::parse(written.yaml_json).at("nc") == 2);
  CHECK(nlohmann::json::parse(written.yaml_json).at("scale") == "n");
  CHECK(written.tensor("model.23.one2one_cv3.2.2.weight").shape == std::vector<int64_t>{2, 80, 1, 1});
  CHECK(written.tensor("model.23.cv3.0.2.bias").shape == std::vector<int64_t>{2});
  const Yolo26Model rebuilt = Yolo26Model::from_checkpoint(written);
  CHECK(rebuilt.nc == 2);
  CHECK(rebuilt.class_names == trained.class_names);
  check_same_parameters(trained, rebuilt);

  trained.class_names.pop_back();
  CHECK_THROWS_WITH(train::checkpoint_of(trained, base), Catch::Contains("1 class names for nc = 2"));
}

TEST_CASE("checkpoint_of: lab detect and lab val load the weights save_trained_weights writes",
          "[checkpoint][cli]") {
  if (test::yolo26n_checkpoint().empty()) return;
  const Checkpoint& base = yolo26n();
  test::ScratchDir dir("model-checkpoint-cli");
  const auto [safetensors, pt] =
      train::save_trained_weights(Yolo26Model::from_checkpoint(base), base, dir.path, "best", {.epoch = 3});
  CHECK(safetensors == dir.path / "best.safetensors");
  CHECK(pt == dir.path / "best.pt");

  // The unchanged model written back detects exactly what the .pt it came from detects.
  const std::string image = test::quoted((fs::path(LAB_ASSETS_DIR) / "images" / "bus.jpg").string());
  auto detections = [&](const fs::path& model) {
    const fs::path json = dir.path / (model.filename().string() + ".json");
    const test::LabResult r =
        test::run_lab("detect " + image + " --model " + test::quoted(model.string()) +
                      " --backend reference --imgsz 128 --nosave --json " + test::quoted(json.string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(test::read_text(json)).at("images").at(0).at("detections");
  };
  const nlohmann::json original = detections(test::yolo26n_checkpoint());
  CHECK(!original.empty());
  CHECK(detections(safetensors) == original);
  CHECK(detections(pt) == original);

  REQUIRE(test::run_lab("data synth " + test::quoted((dir.path / "shapes").string()) +
                        " --classes 3 --train 0 --val 2 --imgsz 64 --seed 3")
              .exit_code == 0);
  for (const fs::path& model : {safetensors, pt}) {
    const test::LabResult val =
        test::run_lab("val " + test::quoted((dir.path / "shapes/data.yaml").string()) + " --model " +
                      test::quoted(model.string()) + " --backend reference --imgsz 64");
    INFO(val.out << val.err);
    CHECK(val.exit_code == 0);
    CHECK(test::contains(val.out, "val: 2 images"));
  }
}
