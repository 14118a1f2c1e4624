// The loss kernels on a backend: every runner (both box families, N not a multiple of BLOCK_N, C = 80 and
// C = 1) and the op API that Yolo26Loss uses (forward feeding backward, exact ties, a point pred box, empty
// problems, argument checks), on the cpu emulator and, in [gpu] twins, on cuda.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

struct RunnerCase {
  const char* runner;
  Params params;
};

void check_runner(Backend& backend, const RunnerCase& rc, uint64_t seed) {
  const Runner& r = Registry::instance().get(rc.runner);
  const Params p = resolve_params(r, rc.params);
  for (const KernelVariant& variant : r.variants()) {
    auto inst = r.instantiate(backend, variant.name, p, seed);
    for (int round = 0; round < 2; ++round) {  // the second round proves every element is written again
      if (round == 1) inst->poison();
      inst->launch();
      for (const OutputCheck& c : inst->check(std::nullopt)) {
        std::string params;
        for (auto& [k, v] : p) params += k + "=" + v + " ";
        INFO(backend.name() << " " << rc.runner << "/" << variant.name << " " << params << "seed " << seed
                            << " " << c.output << ": rel_l2 " << c.metrics.rel_l2 << " max_abs "
                            << c.metrics.max_abs << " at " << c.metrics.worst_index << " ("
                            << c.metrics.worst_out << " vs " << c.metrics.worst_ref << "), non-finite "
                            << c.metrics.non_finite);
        CHECK(c.metrics.non_finite == 0);
        CHECK(c.pass);
      }
    }
  }
}

const std::vector<RunnerCase>& small_cases() {
  static const std::vector<RunnerCase> cases = {
      {"ciou_fwd", {{"N", "1000"}, {"BLOCK_N", "128"}, {"BOX_MIX", "random"}}},
      {"ciou_fwd", {{"N", "1003"}, {"BLOCK_N", "32"}, {"BOX_MIX", "degenerate"}}},
      {"ciou_fwd", {{"N", "77"}, {"BLOCK_N", "1024"}, {"BOX_MIX", "degenerate"}}},
      {"ciou_bwd", {{"N", "1000"}, {"BLOCK_N", "128"}, {"BOX_MIX", "random"}}},
      {"ciou_bwd", {{"N", "1003"}, {"BLOCK_N", "32"}, {"BOX_MIX", "degenerate"}}},
      {"ciou_bwd", {{"N", "77"}, {"BLOCK_N", "1024"}, {"BOX_MIX", "degenerate"}}},
      {"cls_fwd", {{"N", "1000"}, {"C", "80"}, {"BLOCK_N", "128"}}},
      {"cls_fwd", {{"N", "1003"}, {"C", "1"}, {"BLOCK_N", "32"}}},
      {"cls_fwd", {{"N", "77"}, {"C", "80"}, {"BLOCK_N", "1024"}}},
      {"cls_bwd", {{"N", "1000"}, {"C", "80"}, {"BLOCK_N", "128"}}},
      {"cls_bwd", {{"N", "1003"}, {"C", "1"}, {"BLOCK_N", "32"}}},
      {"cls_bwd", {{"N", "77"}, {"C", "80"}, {"BLOCK_N", "1024"}}},
      {"tal_assign",
       {{"B", "3"}, {"IMGSZ", "96"}, {"NC", "4"}, {"GTS", "6"}, {"BLOCK_N", "32"}, {"THREADS", "32"}}},
      {"tal_assign",
       {{"B", "2"}, {"IMGSZ", "128"}, {"NC", "5"}, {"GTS", "10"}, {"TOPK", "7"}, {"TOPK2", "1"}}},
      {"yolo26_head_loss", {{"B", "2"}, {"IMGSZ", "96"}, {"NC", "4"}, {"GTS", "5"}}},
      {"yolo26_head_loss",
       {{"B", "3"},
        {"IMGSZ", "64"},
        {"NC", "3"},
        {"GTS", "4"},
        {"TOPK", "7"},
        {"TOPK2", "1"},
        {"BLOCK_N", "32"}}},
  };
  return cases;
}

// Columns of a [4, N] array from a list of boxes.
std::vector<float> columns(const std::vector<BoxXywh>& boxes) {
  const size_t n = boxes.size();
  std::vector<float> out(4 * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < 4; ++k) out[k * n + i] = float(boxes[i][k]);
  return out;
}

void check_close(const std::vector<float>& out, const std::vector<double>& ref, double rel,
                 const char* what) {
  REQUIRE(out.size() == ref.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(what << "[" << i << "] = " << out[i] << ", reference " << ref[i]);
    CHECK(std::abs(out[i] - ref[i]) <= rel * std::max(1.0, std::abs(ref[i])));
  }
}

// Forward then backward through CiouOp (backward fed the forward kernel's saved values, as Yolo26Loss does),
// on hand-picked exact boxes: ties of every kind, a point pred (gradient ~1e7 through atan(w/h) with h =
// eps), a thin pred, a disjoint pair.
void check_ciou_op_on_ties(Backend& backend) {
  const BoxXywh target{20.5, 30.25, 4.5, 6.0};
  const std::vector<BoxXywh> pred = {
      target,                         // identical
      {19.5, 28.75, 2.5, 3.0},        // inside, sharing the left and top edges
      {16.0, 30.0, 4.5, 5.0},         // touching: x2 == target x1
      {21.0, 30.5, 0.0, 2.0},         // zero width, inside
      {21.0, 30.5, 0.0, 0.0},         // a point, inside
      {21.0, 30.5, 1.0 / 1024, 8.0},  // thin, crossing
      {40.0, 50.0, 3.0, 2.0},         // disjoint
  };
  const std::vector<BoxXywh> targets(pred.size(), target);
  const int n = int(pred.size());
  const std::vector<float> pred_host = columns(pred), target_host = columns(targets);
  const std::vector<float> dy_host = make_loss_weights(n, 5);
  DeviceBuffer p = backend.upload_vector(pred_host), t = backend.upload_vector(target_host);
  DeviceBuffer dy = backend.upload_vector(dy_host);
  for (bool full : {false, true}) {
    for (int block_n : {32, 256}) {
      CiouOp op(backend, full, block_n);
      const CiouSaved saved = op.forward(p, t, n);
      const DeviceBuffer d_pred = op.backward(p, t, saved, dy, n);
      backend.synchronize();
      const CiouArrays ref = ciou_forward_reference(pred_host, target_host, n);
      check_close(backend.download_vector<float>(saved.loss, n), ref.loss, 1e-6, "loss");
      check_close(backend.download_vector<float>(saved.iou, n), ref.iou, 1e-6, "iou");
      check_close(backend.download_vector<float>(saved.alpha, n), ref.alpha, 1e-6, "alpha");
      check_close(backend.download_vector<float>(d_pred, 4 * size_t(n)),
                  ciou_backward_reference(pred_host, target_host, dy_host, n, full), 1e-5,
                  full ? "d_pred (full alpha)" : "d_pred (constant alpha)");
    }
  }
}

void check_cls_op(Backend& backend, int c, int n) {
  const ClsInputs in = make_cls_inputs(c, n, 11);
  const std::vector<float> dy_host = make_loss_weights(n, 11);
  DeviceBuffer x = backend.upload_vector(in.logits), t = backend.upload_vector(in.targets);
  DeviceBuffer dy = backend.upload_vector(dy_host);
  ClsBceOp op(backend, 64);
  const DeviceBuffer loss = op.forward(x, t, c, n);
  const DeviceBuffer d = op.backward(x, t, dy, c, n);
  backend.synchronize();
  check_close(backend.download_vector<float>(loss, n), cls_forward_reference(in.logits, in.targets, c, n),
              1e-5, "cls loss");
  check_close(backend.download_vector<float>(d, size_t(c) * n),
              cls_backward_reference(in.logits, in.targets, dy_host, c, n), 1e-6, "d_logits");
}

}  // namespace

TEST_CASE("loss runners match their references on the cpu backend", "[loss]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const RunnerCase& rc : small_cases()) check_runner(*backend, rc, 3);
}

TEST_CASE("loss runners match their references on the cuda backend", "[loss][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  for (const RunnerCase& rc : small_cases()) check_runner(*backend, rc, 3);
  const std::vector<RunnerCase> large = {
      {"ciou_fwd", {{"N", "1000003"}, {"BLOCK_N", "256"}, {"BOX_MIX", "random"}}},
      {"ciou_bwd", {{"N", "1000003"}, {"BLOCK_N", "256"}, {"BOX_MIX", "degenerate"}}},
      {"cls_fwd", {{"N", "134400"}, {"C", "80"}, {"BLOCK_N", "256"}}},
      {"cls_bwd", {{"N", "134400"}, {"C", "80"}, {"BLOCK_N", "256"}}},
  };
  for (const RunnerCase& rc : large) check_runner(*backend, rc, 4);
}

TEST_CASE("CiouOp forward feeds backward exactly at ties and on degenerate boxes (cpu)", "[loss]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_ciou_op_on_ties(*backend);
}

TEST_CASE("CiouOp forward feeds backward exactly at ties and on degenerate boxes (cuda)", "[loss][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_ciou_op_on_ties(*backend);
}

TEST_CASE("ClsBceOp forward and backward through the op API (cpu)", "[loss]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_cls_op(*backend, 80, 300);
  check_cls_op(*backend, 1, 301);
}

TEST_CASE("ClsBceOp forward and backward through the op API (cuda)", "[loss][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_cls_op(*backend, 80, 8400);
  check_cls_op(*backend, 1, 8401);
}

TEST_CASE("loss ops accept empty problems and reject bad arguments", "[loss]") {
  auto backend = make_backend("cpu", test::embedded_context());
  CHECK_THROWS_AS(CiouOp(*backend, false, 100), UsageError);
  CHECK_THROWS_AS(ClsBceOp(*backend, 2048), UsageError);

  CiouOp ciou(*backend);
  ClsBceOp cls(*backend);
  DeviceBuffer none;
  const CiouSaved empty = ciou.forward(none, none, 0);
  CHECK(empty.loss.bytes() == 0);
  CHECK(ciou.backward(none, none, empty, none, 0).bytes() == 0);
  CHECK(cls.forward(none, none, 80, 0).bytes() == 0);

  DeviceBuffer small = backend->alloc_array<float>(10);
  CHECK_THROWS_AS(ciou.forward(small, small, 3), RuntimeError);  // needs 4 * 3 floats
  CHECK_THROWS_AS(cls.backward(small, small, small, 2, 6), RuntimeError);
  CHECK_THROWS_AS(ciou.forward(small, small, -1), UsageError);
}

TEST_CASE("loss runner parameters are validated with the rule", "[loss]") {
  const Runner& ciou = Registry::instance().get("ciou_bwd");
  CHECK_THROWS_WITH(resolve_params(ciou, {{"BLOCK_N", "48"}}), Catch::Contains("power of two"));
  CHECK_THROWS_WITH(resolve_params(ciou, {{"BOX_MIX", "tiny"}}), Catch::Contains("random, degenerate"));
  CHECK_THROWS_WITH(resolve_params(Registry::instance().get("cls_fwd"), {{"C", "0"}}),
                    Catch::Contains("[1, 65535]"));
}
