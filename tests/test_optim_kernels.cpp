// The optimizer kernels (kernels/optim) on a backend: every runner against its float64 reference (odd tensor
// sizes, all three groups, several steps, 16-bit copies), clipping engaged and not, the in-place op path
// the training loop takes (clip then step, three steps), and the table's argument checks; on the cpu
// emulator and, in [gpu] twins, on cuda.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include "harness/scenario.hpp"
#include "harness/scenario_runner.hpp"
#include "kernels/optim/muon_op.hpp"
#include "kernels/optim/musgd_op.hpp"
#include "kernels/optim/optim_op.hpp"
#include "kernels/optim/optim_problem.hpp"
#include "kernels/optim/optim_reference.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

const std::filesystem::path kScenarios = std::filesystem::path(LAB_SOURCE_DIR) / "scenarios";

// The family's scenario files (odd sizes from 1 to 3001 + 97 i elements, all three groups, up to five steps,
// both 16-bit copies, clipping engaged and not; Muon's Newton-Schulz on wide, tall, square and ragged
// matrices; MuSGD over wide and tall Muon tensors) through the harness, on one backend.
void check_scenarios(const std::string& backend) {
  BackendSet backends(test::embedded_context());
  for (const char* file : {"optim_sgd_step.toml", "optim_adamw_step.toml", "optim_clip_grad_norm.toml",
                           "optim_muon_orthogonalize.toml", "optim_musgd_step.toml"}) {
    const ScenarioPlan plan = plan_scenario(load_scenario(kScenarios / file), backend);
    CHECK(plan.runs.size() >= 6);
    for (const PlannedRun& run : plan.runs) {
      const RunResult r = execute_run(run, backends);
      std::string metrics;
      for (const OutputCheck& c : r.checks)
        metrics += c.output + ": rel_l2 " + std::to_string(c.metrics.rel_l2) + " max_abs " +
                   std::to_string(c.metrics.max_abs) + "\n";
      INFO(file << " case '" << run.case_name << "' seed " << run.seed << "\n" << r.error << metrics);
      CHECK(r.pass);
    }
  }
}

// Gradients of `problem`'s list scaled to total norm `norm` through the op: returns (norm, scale) and
// checks the gradients: scaled by max_norm / (norm + 1e-6) when above 10, untouched (bit for bit) below.
void check_clip_engagement(Backend& backend, double norm) {
  OptimProblem problem(backend, 9, 1001, 1, 7);
  double sum = 0;
  for (float g : problem.grads[0]) sum += double(g) * double(g);
  std::vector<float> grads(problem.grads[0]);
  for (float& g : grads) g = float(double(g) * norm / std::sqrt(sum));
  DeviceBuffer grads_device = backend.upload_vector(grads);
  std::vector<OptimTensor> tensors;
  for (size_t i = 0; i < problem.tensors_count(); ++i)
    tensors.push_back(in_place_tensor(nullptr, grads_device.as<float>() + problem.offsets[i], nullptr,
                                      nullptr, nullptr, problem.counts[i], problem.groups[i]));
  OptimTensorList list(backend, tensors);
  DeviceBuffer out = backend.upload_vector(std::vector<float>{-1.0f, -1.0f});
  ClipGradNormOp op(backend);
  op.run(list, 10.0f, out.as<float>(), out.as<float>() + 1);
  backend.synchronize();
  const std::vector<float> norm_scale = backend.download_vector<float>(out, 2);
  const std::vector<float> clipped = backend.download_vector<float>(grads_device, grads.size());
  double exact = 0;
  for (float g : grads) exact += double(g) * double(g);
  exact = std::sqrt(exact);
  CHECK(std::abs(norm_scale[0] - exact) <= 1e-6 * exact);
  if (norm > 10) {
    const double scale = 10.0 / (exact + 1e-6);
    CHECK(std::abs(norm_scale[1] - scale) <= 1e-6 * scale);
    double after = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      CHECK(clipped[i] == grads[i] * norm_scale[1]);
      after += double(clipped[i]) * double(clipped[i]);
    }
    CHECK(std::abs(std::sqrt(after) - 10.0) < 1e-4);  // the clipped list has norm max_norm
  } else {
    CHECK(norm_scale[1] == 1.0f);
    CHECK(clipped == grads);
  }
}

// The training loop's path: in-place tensors, clip at 10, then three AdamW or SGD steps (one gradient
// each, norm ~35 so every step clips), against the references.
void check_in_place_training_steps(Backend& backend, bool adamw) {
  const int steps = 3;
  OptimProblem problem(backend, 6, 777, steps, 11);
  DeviceBuffer param = backend.upload_vector(problem.initial_param);
  DeviceBuffer grad = backend.alloc(problem.total * sizeof(float));
  DeviceBuffer state0 = backend.upload_vector(std::vector<float>(problem.total, 0.0f));
  DeviceBuffer state1 = backend.upload_vector(std::vector<float>(problem.total, 0.0f));
  DeviceBuffer half = backend.alloc(problem.total * sizeof(uint16_t));
  DeviceBuffer norm_scale = backend.alloc(2 * sizeof(float));
  std::vector<OptimTensor> tensors;
  for (size_t i = 0; i < problem.tensors_count(); ++i) {
    const size_t off = problem.offsets[i];
    tensors.push_back(in_place_tensor(param.as<float>() + off, grad.as<float>() + off,
                                      state0.as<float>() + off, state1.as<float>() + off,
                                      half.as<unsigned short>() + off, problem.counts[i], problem.groups[i]));
  }
  OptimTensorList list(backend, tensors);
  ClipGradNormOp clip(backend);
  SgdOp sgd(backend);
  AdamwOp adam(backend);
  SgdSettings sgd_settings;
  sgd_settings.lr = {0.01, 0.01, 0.08};
  AdamwSettings adam_settings;
  adam_settings.lr = {0.002, 0.002, 0.02};

  std::vector<std::vector<double>> ref_param(problem.tensors_count()), s0(problem.tensors_count()),
      s1(problem.tensors_count());
  const std::vector<double> initial(problem.initial_param.begin(), problem.initial_param.end());
  for (size_t i = 0; i < problem.tensors_count(); ++i) ref_param[i] = problem.slice(initial, i);
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> g = random_uniform(problem.total, -1.0f, 1.0f, derive_seed(uint64_t(s), "g"));
    backend.upload(grad.get(), g.data(), g.size() * sizeof(float));
    clip.run(list, 10.0f, norm_scale.as<float>(), norm_scale.as<float>() + 1);
    if (adamw)
      adam.step(list, adam_settings, s + 1, HalfType::bf16);
    else
      sgd.step(list, sgd_settings, s + 1, HalfType::bf16);
    std::vector<std::vector<double>> grads;
    const std::vector<double> flat(g.begin(), g.end());
    for (size_t i = 0; i < problem.tensors_count(); ++i) grads.push_back(problem.slice(flat, i));
    const double scale = clip_scale_reference(total_grad_norm_reference(grads), 10.0);
    REQUIRE(scale < 0.5);  // uniform [-1, 1) over ~5000 elements: norm ~40, clipping engages
    for (size_t i = 0; i < problem.tensors_count(); ++i) {
      for (double& x : grads[i]) x *= scale;
      const int group = problem.groups[i];
      if (adamw)
        adamw_reference_step(ref_param[i], s0[i], s1[i], grads[i], adam_settings.lr[size_t(group)], 0.937,
                             0.999, 1e-8, group == 0 ? adam_settings.weight_decay : 0.0, s + 1);
      else
        sgd_nesterov_reference_step(ref_param[i], s0[i], grads[i], sgd_settings.lr[size_t(group)], 0.937,
                                    group == 0 ? sgd_settings.weight_decay : 0.0, s + 1);
    }
  }
  backend.synchronize();
  const std::vector<float> out = backend.download_vector<float>(param, problem.total);
  std::vector<double> ref;
  for (const auto& t : ref_param) ref.insert(ref.end(), t.begin(), t.end());
  // The weights' float32 error after three steps (kWeightTolerance of the runners, optim_runners.cpp).
  const OutputCheck c = make_check("param", {problem.total}, out, ref, Tolerance{1e-6, 2e-6});
  INFO(backend.name() << (adamw ? " AdamW" : " SGD") << ": rel_l2 " << c.metrics.rel_l2 << " max_abs "
                      << c.metrics.max_abs);
  CHECK(c.pass);
  // The bf16 copy is the float32 master weight rounded to nearest even, bit for bit.
  CHECK(backend.download_vector<uint16_t>(half, problem.total) == to_half_bits(out, HalfType::bf16));
}

// One step of `optimizer` ("SGD", "AdamW", "MuSGD") from a seeded state, gated by a device float holding
// `gate` (nullopt: no gate); returns every buffer the step may write: the state (weights, both optimizer
// states, the bf16 copies, poisoned before) and MuSGD's Muon scratch. Tensor 0 is a 3 x 4 Muon matrix,
// tensor 1 a 37-element bias.
struct GatedStep {
  std::vector<std::vector<float>> state;
  std::vector<float> scratch;
  bool operator==(const GatedStep&) const = default;
};
GatedStep gated_step(Backend& backend, const std::string& optimizer, std::optional<float> gate) {
  const size_t total = 12 + 37;
  DeviceBuffer param = backend.upload_vector(random_uniform(total, -1.0f, 1.0f, 21));
  DeviceBuffer grad = backend.upload_vector(random_uniform(total, -1.0f, 1.0f, 22));
  DeviceBuffer state0 = backend.upload_vector(random_uniform(total, -0.1f, 0.1f, 23));
  DeviceBuffer state1 = backend.upload_vector(random_uniform(total, 0.0f, 0.01f, 24));
  DeviceBuffer update = backend.upload_vector(std::vector<float>(12, -7.0f));
  DeviceBuffer half = backend.upload_vector(std::vector<uint16_t>(total, 0xabcd));
  DeviceBuffer gate_value = backend.upload_vector(std::vector<float>{gate.value_or(0.0f)});
  const auto entry = [&](size_t offset, long long count, int group) {
    return in_place_tensor(param.as<float>() + offset, grad.as<float>() + offset, state0.as<float>() + offset,
                           state1.as<float>() + offset, half.as<unsigned short>() + offset, count, group);
  };
  OptimTensor matrix = entry(0, 12, 0);
  if (optimizer == "MuSGD") matrix.muon_update = update.as<float>();
  OptimTensorList list(backend, {matrix, entry(12, 37, 2)});
  const float* g = gate ? gate_value.as<const float>() : nullptr;
  if (optimizer == "SGD") {
    SgdOp(backend).step(list, SgdSettings{}, 2, HalfType::bf16, g);
  } else if (optimizer == "AdamW") {
    AdamwOp(backend).step(list, AdamwSettings{}, 2, HalfType::bf16, g);
  } else {
    MusgdOp(backend).step(list, {MuonShape{3, 4, 1.0}, MuonShape{}}, MusgdSettings{}, HalfType::bf16, g);
  }
  backend.synchronize();
  const std::vector<uint16_t> bits = backend.download_vector<uint16_t>(half, total);
  return {{backend.download_vector<float>(param, total), backend.download_vector<float>(state0, total),
           backend.download_vector<float>(state1, total), std::vector<float>(bits.begin(), bits.end())},
          backend.download_vector<float>(update, 12)};
}

// fp16 training's skipped step, decided on the device: a NaN or infinite gate leaves the state as it was
// (bit for bit; MuSGD's orthogonalisation still rewrites its scratch), a finite one steps exactly as no gate
// does; and the ungated step does change the weights, so the comparison can fail.
void check_gated_steps(Backend& backend) {
  const std::vector<std::vector<float>> before = {
      random_uniform(49, -1.0f, 1.0f, 21), random_uniform(49, -0.1f, 0.1f, 23),
      random_uniform(49, 0.0f, 0.01f, 24), std::vector<float>(49, float(0xabcd))};
  for (const char* optimizer : {"SGD", "AdamW", "MuSGD"}) {
    INFO(backend.name() << " " << optimizer);
    const GatedStep ungated = gated_step(backend, optimizer, std::nullopt);
    for (float skipping : {INFINITY, -INFINITY, NAN})
      CHECK(gated_step(backend, optimizer, skipping).state == before);
    CHECK(gated_step(backend, optimizer, 3.4e38f) == ungated);
    CHECK(ungated.state[0] != before[0]);
  }
}

}  // namespace

TEST_CASE("a step gated by a non-finite device float writes nothing, by a finite one steps as ungated (cpu)",
          "[optim]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_gated_steps(*backend);
}

TEST_CASE("a step gated by a non-finite device float writes nothing, by a finite one steps as ungated (cuda)",
          "[optim][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_gated_steps(*backend);
}

TEST_CASE("optimizer scenarios pass against their float64 references on the cpu backend", "[optim]") {
  check_scenarios("cpu");
}

TEST_CASE("optimizer scenarios pass against their float64 references on the cuda backend", "[optim][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_scenarios("cuda");
}

TEST_CASE("clip_grad_norm scales gradients above max_norm 10 and leaves them alone below (cpu)", "[optim]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_clip_engagement(*backend, 37.5);
  check_clip_engagement(*backend, 9.5);
}

TEST_CASE("clip_grad_norm scales gradients above max_norm 10 and leaves them alone below (cuda)",
          "[optim][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_clip_engagement(*backend, 37.5);
  check_clip_engagement(*backend, 9.5);
}

TEST_CASE("clip then three in-place SGD and AdamW steps follow torch's formulas (cpu)", "[optim]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_in_place_training_steps(*backend, false);
  check_in_place_training_steps(*backend, true);
}

TEST_CASE("clip then three in-place SGD and AdamW steps follow torch's formulas (cuda)", "[optim][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_in_place_training_steps(*backend, false);
  check_in_place_training_steps(*backend, true);
}

TEST_CASE("the optimizer's tensor table refuses an empty list, an empty tensor and an unknown group",
          "[optim]") {
  auto backend = make_backend("cpu", test::embedded_context());
  float x = 0;
  CHECK_THROWS_WITH(OptimTensorList(*backend, {}), "optimizer: the tensor list is empty");
  CHECK_THROWS_WITH(OptimTensorList(*backend, {in_place_tensor(&x, &x, &x, &x, nullptr, 0, 0)}),
                    "optimizer: a tensor of the list has no elements");
  CHECK_THROWS_WITH(OptimTensorList(*backend, {in_place_tensor(&x, &x, &x, &x, nullptr, 1, 3)}),
                    "optimizer: parameter group 3 is not 0, 1 or 2");
}

TEST_CASE("Muon's update scale follows the gradient's last two dimensions, an empty matrix is refused",
          "[optim]") {
  CHECK(muon_update_scale({64, 16, 3, 3}) == 1.0);  // a square conv kernel: kh / kw = 1
  CHECK(muon_update_scale({300, 75}) == Approx(2.0));
  CHECK(muon_update_scale({17, 300}) == 1.0);
  CHECK_THROWS_WITH(muon_update_scale({5}), "muon: the gradient has fewer than two dimensions");
  auto backend = make_backend("cpu", test::embedded_context());
  MuonOrthogonalizeOp op(*backend);
  float x = 0;
  CHECK_THROWS_WITH(op.run(&x, 0, 4, 1.0, &x), "muon: the matrix has no elements");
}

TEST_CASE("MuSGD refuses shapes that do not match the tensor list", "[optim]") {
  auto backend = make_backend("cpu", test::embedded_context());
  DeviceBuffer buffer = backend->upload_vector(std::vector<float>(12, 0.0f));
  float* b = buffer.as<float>();
  OptimTensorList list(*backend, {in_place_tensor(b, b, b, b, nullptr, 12, 0)});
  MusgdOp op(*backend);
  CHECK_THROWS_WITH(op.step(list, {}, MusgdSettings{}), "musgd: 0 shapes for 1 tensors");
  // A Muon shape on a tensor without a muon_update buffer, and a shape of the wrong size.
  CHECK_THROWS_WITH(op.step(list, {MuonShape{3, 4, 1.0}}, MusgdSettings{}),
                    "musgd: tensor 0's Muon shape does not match its count or its muon_update buffer");
  OptimTensor with_update = in_place_tensor(b, b, b, b, nullptr, 12, 0);
  with_update.muon_update = b;
  OptimTensorList muon_list(*backend, {with_update});
  CHECK_THROWS_WITH(op.step(muon_list, {MuonShape{5, 4, 1.0}}, MusgdSettings{}),
                    "musgd: tensor 0's Muon shape does not match its count or its muon_update buffer");
}
