// The state-dict .pt writer (pipeline/checkpoint/torch_checkpoint_writer.hpp): yolo26n (F16) and a perturbed,
// float32 model written as .pt and read back by load_checkpoint bit-identically; the zip and pickle structure
// checked without torch by tests/check_pt_structure.py against a safetensors twin (and that script refusing
// an Ultralytics module pickle, which weights_only would refuse too); `lab convert IN OUT.pt`. `lab detect
// --model last.pt`: tests/test_model_checkpoint.cpp.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"
#include "pipeline/train/model_checkpoint.hpp"
#include "tests/checkpoint_test_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

const std::string kStructureScript = std::string(LAB_SOURCE_DIR) + "/tests/check_pt_structure.py";

const Checkpoint& yolo26n() {
  static const Checkpoint checkpoint = load_checkpoint(test::yolo26n_checkpoint());
  return checkpoint;
}

void check_same_checkpoint(const Checkpoint& written, const Checkpoint& loaded) {
  REQUIRE(loaded.state_dict.size() == written.state_dict.size());
  for (const auto& [key, tensor] : written.state_dict) {
    CAPTURE(key);
    REQUIRE(loaded.contains(key));
    const HostTensor& back = loaded.tensor(key);
    CHECK(back.shape == tensor.shape);
    CHECK(back.stored_dtype == tensor.stored_dtype);
    CHECK(back.values == tensor.values);
  }
  CHECK(loaded.class_names == written.class_names);
  CHECK(loaded.nc == written.nc);
  CHECK(loaded.scale == written.scale);
  CHECK(nlohmann::json::parse(loaded.yaml_json) == nlohmann::json::parse(written.yaml_json));
}

test::LabResult check_structure(const fs::path& pt, const fs::path& twin) {
  return test::run_command("python3 " + test::quoted(kStructureScript) + " " + test::quoted(pt.string()) +
                           " " + test::quoted(twin.string()));
}

}  // namespace

TEST_CASE("torch .pt writer: yolo26n (F16) round trip through load_checkpoint is bit-identical",
          "[checkpoint]") {
  if (test::yolo26n_checkpoint().empty()) return;
  test::ScratchDir dir("pt-writer");
  const fs::path pt = dir.path / "last.pt";
  save_checkpoint_pt(yolo26n(), pt, {.epoch = 7, .train_metrics = {{"metrics/mAP50-95(B)", 0.5}}});
  check_same_checkpoint(yolo26n(), load_checkpoint(pt));
  CHECK(yolo26n().tensor("model.0.conv.weight").stored_dtype == "F16");

  CHECK(test::read_zip_member(pt, "last/version") == "3\n");
  CHECK(test::read_zip_member(pt, "last/byteorder") == "little");
  const fs::path twin = dir.path / "last.safetensors";
  save_checkpoint_safetensors(yolo26n(), twin);
  const test::LabResult check = check_structure(pt, twin);
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  // Ultralytics' state dict of yolo26n has 708 entries: our 594 float tensors and 114 BatchNorm counters.
  CHECK(test::contains(check.out, "ok: 594 tensors (+114 num_batches_tracked)"));
}

TEST_CASE("torch .pt writer: a trained float32 model round trips and matches its safetensors twin",
          "[checkpoint][model]") {
  if (test::yolo26n_checkpoint().empty()) return;
  Yolo26Model trained = Yolo26Model::from_checkpoint(yolo26n());
  test::perturb_parameters(trained);
  trained.class_names[0] = "pedestrian \xc3\xa9";  // UTF-8 survives
  const Checkpoint written = train::checkpoint_of(trained, yolo26n());

  test::ScratchDir dir("pt-writer-trained");
  const fs::path pt = dir.path / "best.pt";
  save_checkpoint_pt(written, pt);
  const Checkpoint loaded = load_checkpoint(pt);
  check_same_checkpoint(written, loaded);
  CHECK(loaded.class_names[0] == "pedestrian \xc3\xa9");

  const fs::path twin = dir.path / "best.safetensors";
  save_checkpoint_safetensors(written, twin);
  const test::LabResult check = check_structure(pt, twin);
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);

  // The structure check can fail: a twin with one value changed, and Ultralytics' own pickled module.
  Checkpoint changed = written;
  changed.state_dict.at("model.0.conv.weight").values[3] += 1.0f;
  save_checkpoint_safetensors(changed, twin);
  const test::LabResult differs = check_structure(pt, twin);
  CHECK(differs.exit_code == 1);
  CHECK(test::contains(differs.out, "'model.0.conv.weight' (F32) differs from the twin (F32)"));
  const test::LabResult module = check_structure(test::yolo26n_checkpoint(), twin);
  CHECK(module.exit_code == 1);
  CHECK(test::contains(module.out, "not one"));
}

TEST_CASE("torch .pt writer: the archive folder is the file's stem, bad input is a one-line error",
          "[checkpoint]") {
  if (test::yolo26n_checkpoint().empty()) return;
  test::ScratchDir dir("pt-writer-errors");
  save_checkpoint_pt(yolo26n(), dir.path / "my run.pt");
  CHECK(test::read_zip_member(dir.path / "my run.pt", "archive/version") == "3\n");

  Checkpoint broken = yolo26n();
  broken.state_dict.at("model.0.conv.weight").values.pop_back();
  const fs::path target = dir.path / "broken.pt";
  CHECK_THROWS_WITH(save_checkpoint_pt(broken, target),
                    Catch::Contains("broken.pt: tensor 'model.0.conv.weight' has 431 values for shape"));
  CHECK(!fs::exists(target));
  size_t files = 0;  // only "my run.pt": no partial file is left behind
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
}

TEST_CASE("torch .pt writer: lab convert IN OUT.pt writes the state-dict .pt", "[checkpoint][cli]") {
  if (test::yolo26n_checkpoint().empty()) return;
  test::ScratchDir dir("pt-writer-convert");
  const fs::path pt = dir.path / "yolo26n-state.pt", twin = dir.path / "yolo26n-state.safetensors";
  for (const fs::path& out : {pt, twin}) {
    const test::LabResult r = test::run_lab("convert " + test::quoted(test::yolo26n_checkpoint().string()) +
                                            " " + test::quoted(out.string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(test::contains(r.out,
                         "wrote " + out.string() + ": 594 tensors, 2591848 parameters, dtype F16, nc 80"));
  }
  check_same_checkpoint(yolo26n(), load_checkpoint(pt));
  const test::LabResult check = check_structure(pt, twin);
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}
