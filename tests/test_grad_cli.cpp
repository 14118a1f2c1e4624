// `lab grad` end to end on a synthetic yolo26n (both heads) at 64x64: the loss table, the gradient file (one
// float32 grad.<name> tensor per checkpoint parameter, written atomically), --steps, --backend cpu (the
// kernel backward) against the reference's file, --bn batch on both backwards, and one-line errors with exit
// 2 for bad input (an image that does not decode, a malformed label line, a class the model does not have, a
// checkpoint without the one-to-many head, an unknown optimizer or backend, --steps off the reference).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "pipeline/image/image.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;

namespace {

// The checkpoint's state dict as a safetensors file.
void write_checkpoint(const Checkpoint& c, const std::filesystem::path& path) {
  std::vector<SafetensorsTensor> tensors;
  for (const auto& [key, t] : c.state_dict) tensors.push_back(f32_tensor(key, t.shape, t.values));
  write_safetensors(path, tensors);
}

}  // namespace

TEST_CASE("lab grad writes every parameter's gradient and rejects bad input with exit 2", "[grad_cli]") {
  test::ScratchDir dir("lab_grad");
  const Checkpoint both = test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true});
  write_checkpoint(both, dir.path / "both.safetensors");
  write_checkpoint(test::synthetic_checkpoint({.scale = "n", .nc = 3}), dir.path / "o2o.safetensors");
  Image image(80, 60, 90);
  for (int y = 10; y < 40; ++y)
    for (int x = 20; x < 50; ++x) image.pixel(x, y)[0] = 220;
  write_image(image, dir.path / "img.png");
  test::write_file(dir.path / "labels.txt", "0 0.4375 0.4166 0.375 0.5\n2 0.8 0.8 0.2 0.3\n");
  const std::string common = (dir.path / "img.png").string() + " --labels " +
                             (dir.path / "labels.txt").string() + " --imgsz 64 --square --model ";
  const std::string out = (dir.path / "g.safetensors").string();

  const test::LabResult ok = test::run_lab("grad " + common + (dir.path / "both.safetensors").string() +
                                           " --out " + out + " --steps 1 --optimizer SGD");
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(test::contains(ok.out, "one2many"));
  CHECK(test::contains(ok.out, "gradient L2 norm"));
  CHECK(test::contains(ok.out, "after 1 steps: loss"));
  const SafetensorsFile grads = SafetensorsFile::load(out);
  CHECK(grads.info("grad.model.0.conv.weight").shape == std::vector<int64_t>{16, 3, 3, 3});
  CHECK(grads.info("grad.model.0.bn.bias").dtype == "F32");
  CHECK(grads.info("grad.model.23.cv3.1.2.bias").shape == std::vector<int64_t>{3});
  CHECK(grads.info("grad.model.23.one2one_cv2.0.2.weight").shape == std::vector<int64_t>{4, 16, 1, 1});
  size_t bn_parameters = 0;
  for (const auto& [key, t] : both.state_dict)
    if (key.find("running_") != std::string::npos) ++bn_parameters;
  CHECK(grads.keys().size() == both.state_dict.size() - bn_parameters);  // all but the running statistics

  // --backend cpu: the kernel backward on the emulator writes the same tensors, each within 1e-4 relative L2
  // of the float64 reference's (float32 kernels; tests/test_kernel_backward.cpp has the reasoning).
  const std::string kernel_out = (dir.path / "g_cpu.safetensors").string();
  const test::LabResult cpu = test::run_lab("grad " + common + (dir.path / "both.safetensors").string() +
                                            " --backend cpu --out " + kernel_out);
  INFO(cpu.out << cpu.err);
  REQUIRE(cpu.exit_code == 0);
  CHECK(test::contains(cpu.out, "kernel backward (float32) on cpu"));
  const SafetensorsFile kernel_grads = SafetensorsFile::load(kernel_out);
  REQUIRE(kernel_grads.keys() == grads.keys());
  for (const std::string& key : grads.keys()) {
    const std::vector<int64_t> shape = grads.info(key).shape;
    const std::vector<float> want = grads.floats(key, shape), got = kernel_grads.floats(key, shape);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    INFO(key << ": |diff| " << std::sqrt(diff) << ", |reference| " << std::sqrt(norm));
    CHECK(std::sqrt(diff) <= 1e-4 * std::sqrt(norm) + 1e-12);
  }

  // --bn batch: the same parameter tensors from the reference with batch statistics (checked against finite
  // differences in test_reference_backward), other values than frozen BatchNorm's.
  const std::string batch_out = (dir.path / "g_batch.safetensors").string();
  const test::LabResult batch = test::run_lab("grad " + common + (dir.path / "both.safetensors").string() +
                                              " --bn batch --out " + batch_out);
  INFO(batch.out << batch.err);
  REQUIRE(batch.exit_code == 0);
  CHECK(test::contains(batch.out, "BatchNorm with batch statistics"));
  const SafetensorsFile batch_grads = SafetensorsFile::load(batch_out);
  CHECK(batch_grads.keys() == grads.keys());
  CHECK(batch_grads.floats("grad.model.0.bn.weight", {16}) != grads.floats("grad.model.0.bn.weight", {16}));
  // --bn batch --backend cpu: the kernel backward with batch statistics writes the same tensors for the same
  // loss. Their values are compared with the reference's in tests/test_kernel_backward.cpp at batch 2: here
  // (batch 1 at 64x64, four values a channel at stride 32) the gradients are ill-conditioned, a one-ulp nudge
  // of the input moves the reference's own by ~1e-3 (norm ~1e5), and float32 against float64 by ~10 %.
  const std::string batch_cpu_out = (dir.path / "g_batch_cpu.safetensors").string();
  const test::LabResult batch_cpu =
      test::run_lab("grad " + common + (dir.path / "both.safetensors").string() +
                    " --bn batch --backend cpu --out " + batch_cpu_out);
  INFO(batch_cpu.out << batch_cpu.err);
  REQUIRE(batch_cpu.exit_code == 0);
  CHECK(test::contains(batch_cpu.out, "BatchNorm with batch statistics"));
  const auto printed_total = [](const std::string& out) {
    const size_t at = out.find("\ntotal ");
    REQUIRE(at != std::string::npos);
    return std::stod(out.substr(at + 7));
  };
  CHECK(printed_total(batch_cpu.out) == Approx(printed_total(batch.out)).epsilon(1e-4));
  const SafetensorsFile batch_cpu_grads = SafetensorsFile::load(batch_cpu_out);
  REQUIRE(batch_cpu_grads.keys() == batch_grads.keys());
  for (const std::string& key : batch_grads.keys())
    CHECK(batch_cpu_grads.info(key).shape == batch_grads.info(key).shape);

  struct Bad {
    std::string args, names;
  };
  test::write_file(dir.path / "bad.txt", "0 0.5 0.5 0.2\n");
  test::write_file(dir.path / "class.txt", "0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n");
  test::write_file(dir.path / "junk.png", "not an image");
  const Bad bad[] = {
      {(dir.path / "junk.png").string() + " --labels " + (dir.path / "labels.txt").string() + " --model " +
           (dir.path / "both.safetensors").string(),
       "junk.png"},
      {(dir.path / "img.png").string() + " --labels " + (dir.path / "bad.txt").string() + " --model " +
           (dir.path / "both.safetensors").string(),
       "bad.txt:1"},
      {common + (dir.path / "o2o.safetensors").string(), "no one-to-many head"},
      {(dir.path / "img.png").string() + " --labels " + (dir.path / "class.txt").string() + " --model " +
           (dir.path / "both.safetensors").string(),
       "class.txt:2: class 3 is not one of the model's 3 classes"},
      {common + (dir.path / "both.safetensors").string() + " --steps 1 --optimizer Adam", "--optimizer"},
      {common + (dir.path / "both.safetensors").string() + " --backend cpu --steps 1", "--steps"},
      {common + (dir.path / "o2o.safetensors").string() + " --backend cpu", "no one-to-many head"},
      {common + (dir.path / "both.safetensors").string() + " --backend gpu", "--backend"},
      {common + (dir.path / "both.safetensors").string() + " --bn running", "--bn"},
      // 32x32: layer 7's stride-2 conv has 1x1 maps, one value per channel at batch 1 (either backward).
      {(dir.path / "img.png").string() + " --labels " + (dir.path / "labels.txt").string() +
           " --imgsz 32 --square --bn batch --model " + (dir.path / "both.safetensors").string(),
       "model.7: batch-statistics BatchNorm needs at least two values per channel (batch 1 x 1 positions)"},
      {(dir.path / "img.png").string() + " --labels " + (dir.path / "labels.txt").string() +
           " --imgsz 32 --square --bn batch --backend cpu --model " +
           (dir.path / "both.safetensors").string(),
       "model.7: batch-statistics BatchNorm needs at least two values per channel (batch 1 x 1 positions)"},
  };
  for (const Bad& b : bad) {
    const test::LabResult r =
        test::run_lab("grad " + b.args + " --out " + (dir.path / "bad.safetensors").string());
    INFO(b.args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK(test::contains(r.err, b.names));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(dir.path / "bad.safetensors"));
  }
}
