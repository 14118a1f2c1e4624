// The optimizer ops against torch.optim itself (tests/optim_torch_reference.py): the same seeded weights and
// three steps' gradients (norm ~35: every step clips at 10), SGD (Nesterov) and AdamW with Ultralytics'
// three groups and a bias lr of its own, on cuda. torch is on the GPU machine only: the test skips without
// a GPU, and without an importable torch.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "kernels/compare.hpp"
#include "kernels/optim/optim_op.hpp"
#include "kernels/optim/optim_problem.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

const std::string kScript = std::string(LAB_SOURCE_DIR) + "/tests/optim_torch_reference.py";

void write_floats(const std::filesystem::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(float)));
}

std::vector<float> read_floats(const std::filesystem::path& path) {
  const std::string bytes = test::read_text(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// Our weights after clip + step, three times, in place on `backend`.
std::vector<float> our_steps(Backend& backend, const OptimProblem& problem, bool adamw,
                             const std::array<double, kOptimGroups>& lr, double momentum,
                             double weight_decay) {
  DeviceBuffer param = backend.upload_vector(problem.initial_param);
  DeviceBuffer grad = backend.alloc(problem.total * sizeof(float));
  DeviceBuffer state0 = backend.upload_vector(std::vector<float>(problem.total, 0.0f));
  DeviceBuffer state1 = backend.upload_vector(std::vector<float>(problem.total, 0.0f));
  DeviceBuffer norm_scale = backend.alloc(2 * sizeof(float));
  std::vector<OptimTensor> tensors;
  for (size_t i = 0; i < problem.tensors_count(); ++i) {
    const size_t off = problem.offsets[i];
    tensors.push_back(in_place_tensor(param.as<float>() + off, grad.as<float>() + off,
                                      state0.as<float>() + off, state1.as<float>() + off, nullptr,
                                      problem.counts[i], problem.groups[i]));
  }
  OptimTensorList list(backend, tensors);
  ClipGradNormOp clip(backend);
  SgdOp sgd(backend);
  AdamwOp adam(backend);
  for (size_t s = 0; s < problem.grads.size(); ++s) {
    backend.upload(grad.get(), problem.grads[s].data(), problem.total * sizeof(float));
    clip.run(list, 10.0f, norm_scale.as<float>(), norm_scale.as<float>() + 1);
    if (adamw) {
      AdamwSettings settings;
      settings.lr = lr, settings.beta1 = momentum, settings.weight_decay = weight_decay;
      adam.step(list, settings, int(s) + 1);
    } else {
      SgdSettings settings;
      settings.lr = lr, settings.momentum = momentum, settings.weight_decay = weight_decay;
      sgd.step(list, settings, int(s) + 1);
    }
  }
  backend.synchronize();
  return backend.download_vector<float>(param, problem.total);
}

void check_against_torch(Backend& backend, bool adamw) {
  const int steps = 3;
  OptimProblem problem(backend, 7, 1501, steps, 5);
  const std::array<double, kOptimGroups> lr =
      adamw ? std::array{0.002, 0.002, 0.02} : std::array{0.01, 0.01, 0.08};
  const double momentum = 0.937, weight_decay = 0.0005;
  test::ScratchDir dir("optim-torch");
  std::string counts, groups;
  for (size_t i = 0; i < problem.tensors_count(); ++i) {
    counts += (i ? ", " : "") + std::to_string(problem.counts[i]);
    groups += (i ? ", " : "") + std::to_string(problem.groups[i]);
  }
  test::write_file(dir.path / "config.json",
                   "{\"optimizer\": \"" + std::string(adamw ? "AdamW" : "SGD") + "\", \"counts\": [" +
                       counts + "], \"groups\": [" + groups + "], \"lr\": [" + std::to_string(lr[0]) + ", " +
                       std::to_string(lr[1]) + ", " + std::to_string(lr[2]) + "], \"momentum\": 0.937, " +
                       "\"weight_decay\": 0.0005, \"max_norm\": 10.0, \"steps\": " + std::to_string(steps) +
                       "}");
  write_floats(dir.path / "param.bin", problem.initial_param);
  for (int s = 0; s < steps; ++s)
    write_floats(dir.path / ("grad" + std::to_string(s) + ".bin"), problem.grads[size_t(s)]);
  const test::LabResult run =
      test::run_command("python3 " + test::quoted(kScript) + " " + test::quoted(dir.path.string()));
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::vector<float> torch_out = read_floats(dir.path / "out.bin");
  const std::vector<float> ours = our_steps(backend, problem, adamw, lr, momentum, weight_decay);
  REQUIRE(torch_out.size() == ours.size());
  // Both float32, in different orders of the same operations: a few 2^-24 roundings per step on weights
  // of ~1 (the kernels' own error against float64 is ~1e-7, optim_runners.cpp).
  const OutputCheck c =
      make_check("param", {ours.size()}, ours, std::vector<double>(torch_out.begin(), torch_out.end()),
                 Tolerance{2e-6, 4e-6});
  INFO((adamw ? "AdamW" : "SGD") << ": rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs);
  CHECK(c.pass);
}

}  // namespace

TEST_CASE("clip + SGD and AdamW steps match torch.optim (cuda, where torch is importable)", "[optim][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (test::run_command("python3 -c 'import torch'").exit_code != 0) {
    WARN("skipped: torch is not importable here");
    return;
  }
  auto backend = make_backend("cuda", test::embedded_context());
  check_against_torch(*backend, false);
  check_against_torch(*backend, true);
}
