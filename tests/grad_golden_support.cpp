// The bus case of the grad golden and the per-tensor comparison with it.
#include "tests/grad_golden_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/loss/training_image.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::test {

namespace {

const std::filesystem::path kAssets = LAB_ASSETS_DIR;

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

BusCase load_bus_case() {
  BusCase c;
  const std::filesystem::path model_file = kAssets / "models/yolo26n.pt", image = kAssets / "images/bus.jpg",
                              labels = kAssets / "goldens/bus_labels.txt",
                              golden_json = kAssets / "goldens/bus_train_golden.json",
                              golden_file = kAssets / "goldens/bus_train_golden.safetensors",
                              loss_json = kAssets / "goldens/bus_loss.json";
  for (const auto& f : {model_file, image, labels, golden_json, golden_file, loss_json})
    if (!std::filesystem::exists(f)) {
      c.missing = f.string();
      return c;
    }
  c.model = Yolo26Model::from_checkpoint(load_checkpoint(model_file));
  const loss::TrainingImage bus = loss::load_training_image(image, labels, 640, false, c.model.nc);
  c.input = reference::RefTensor(1, 3, bus.height, bus.width);
  c.input.values = bus.input;
  c.labels = bus.ground_truth;
  c.golden = read_json(golden_json);
  c.bus_loss = read_json(loss_json);
  return c;
}

void check_gradients_against_golden(const BusCase& bus, const std::vector<ParameterGradient>& parameters,
                                    const char* who) {
  const SafetensorsFile stored = SafetensorsFile::load(kAssets / "goldens/bus_train_golden.safetensors");
  const nlohmann::json& tensors = bus.golden["tensors"];
  CHECK(parameters.size() == tensors.size());
  std::set<std::string> names;
  double worst_rel = 0, worst_norm = 0;
  std::string worst_rel_name, worst_norm_name;
  for (const ParameterGradient& p : parameters) {
    names.insert(p.name);
    INFO(who << ": " << p.name);
    REQUIRE(tensors.contains(p.name));
    const std::vector<float> expected = stored.floats("grad." + p.name, p.shape);
    double diff = 0, ref = 0, norm = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff += (p.values[i] - expected[i]) * (p.values[i] - expected[i]);
      ref += double(expected[i]) * expected[i];
      norm += p.values[i] * p.values[i];
    }
    const double golden_l2 = tensors[p.name]["l2"].get<double>();
    if (golden_l2 == 0) {  // the one-to-many box branch of P3: no one-to-many positive on that level
      CHECK(norm == 0);
      continue;
    }
    const double rel = std::sqrt(diff / ref);
    const double norm_error = std::abs(std::sqrt(norm) - golden_l2) / golden_l2;
    INFO("rel L2 " << rel << ", L2 " << std::sqrt(norm) << " vs " << golden_l2);
    CHECK(rel <= 1e-2);
    CHECK(norm_error <= 1e-3);
    if (rel > worst_rel) worst_rel = rel, worst_rel_name = p.name;
    if (norm_error > worst_norm) worst_norm = norm_error, worst_norm_name = p.name;
  }
  CHECK(names.size() == tensors.size());
  std::printf("grad golden (%s): %zu tensors, worst rel L2 %.3g (%s), worst L2-norm error %.3g (%s)\n", who,
              parameters.size(), worst_rel, worst_rel_name.c_str(), worst_norm, worst_norm_name.c_str());
}

}  // namespace lab::test
