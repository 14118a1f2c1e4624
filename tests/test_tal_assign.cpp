// The device task-aligned assignment (tal_assign.cu through TalAssignOp) against the host float64 assigner
// (assign_image) and the reference's dense transcription (reference_detached): the positive set exactly and
// the target scores to float64 rounding, on seeded cases with several images, 0..many gts, tiny (STAL),
// overlapping and border boxes, for o2m (top-k 10) and o2o (top-k 7, top-k2 1); determinism; bad input.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/loss/assign_inputs.hpp"
#include "kernels/loss/host_assigner.hpp"
#include "kernels/loss/tal_assign_op.hpp"
#include "pipeline/loss/loss_reference.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using namespace lab::loss;

namespace {

struct DeviceAssignment {
  std::vector<int> gt_of_anchor, claim_count;
  std::vector<double> target_score;
  double target_score_sum = 0;
};

DeviceAssignment run_device(Backend& backend, const AssignCase& c, const AssignerSettings& settings) {
  const DeviceBuffer boxes = backend.upload_vector(c.boxes), logits = backend.upload_vector(c.logits);
  const DeviceAnchorGrid anchors = upload_anchor_grid(backend, c.anchors);
  const DeviceGroundTruth gts = upload_ground_truth(backend, c.gts);
  const TalAssignOp op(backend);
  TalAssignment out = op.allocate(c.batch, gts.max_gts, anchors.count);
  op.assign_into(boxes, logits, c.classes, anchors, gts, settings, out);
  backend.synchronize();
  const size_t n = size_t(c.batch) * c.anchors.size();
  return {backend.download_vector<int>(out.gt_of_anchor, n), backend.download_vector<int>(out.claim_count, n),
          backend.download_vector<double>(out.target_score, n),
          backend.download_vector<double>(out.target_score_sum, 1)[0]};
}

// The same case as a LossBatch (its one2many head) for the dense reference.
LossBatch as_loss_batch(const AssignCase& c) {
  LossBatch batch;
  batch.batch = c.batch, batch.num_classes = c.classes;
  batch.image_height = batch.image_width = c.image_size;
  batch.anchors = c.anchors;
  batch.one2many = batch.one2one = {c.boxes, c.logits};
  batch.ground_truth = c.gts;
  return batch;
}

// Compares the device assignment with both float64 assigners; returns the positives and the anchors
// claimed by more than one gt (so a caller can require the conflict rule to have been exercised).
std::pair<int, int> check_case(Backend& backend, const AssignCase& c, const AssignerSettings& settings) {
  const DeviceAssignment device = run_device(backend, c, settings);
  const ReferenceDetached dense =
      reference_detached(as_loss_batch(c), to_reference({c.boxes, c.logits}), settings);
  const size_t a = c.anchors.size();
  int positives = 0, conflicts = 0;
  double host_sum = 0;
  for (int b = 0; b < c.batch; ++b) {
    std::vector<int> host_gt(a, -1);
    std::vector<double> host_score(a, 0.0);
    const ImageHead image{c.boxes.data() + size_t(b) * 4 * a, c.logits.data() + size_t(b) * c.classes * a,
                          c.classes};
    for (const Positive& p : assign_image(c.anchors, image, c.gts[b], settings))
      host_gt[p.anchor] = p.gt, host_score[p.anchor] = p.score, host_sum += p.score;
    const std::vector<int> device_gt(device.gt_of_anchor.begin() + b * a,
                                     device.gt_of_anchor.begin() + (b + 1) * a);
    INFO("image " << b << " with " << c.gts[b].size() << " gts");
    CHECK(device_gt == host_gt);
    CHECK(device_gt == dense.gt_of_anchor[b]);
    for (size_t i = 0; i < a; ++i) {
      // float64 on both sides: equal on the emulator up to contraction; cuda's atan/exp/pow are within 2 ulp.
      // The 1e-15 floor is for the dense reference, whose overlap 1 - (1 - CIoU) is exact only to ~1e-16
      // absolute, so a score of ~1e-300 (an anchor whose overlap is ~1e-50) is not resolved there.
      const double score = device.target_score[b * a + i];
      CHECK(std::abs(score - host_score[i]) <= 1e-12 * std::abs(host_score[i]) + 1e-15);
      CHECK(std::abs(score - dense.target_score[b][i]) <= 1e-12 * std::abs(dense.target_score[b][i]) + 1e-15);
      positives += device_gt[i] >= 0;
      conflicts += device.claim_count[b * a + i] > 1;
    }
  }
  CHECK(std::abs(device.target_score_sum - host_sum) <= 1e-12 * host_sum);  // summation order only
  return {positives, conflicts};
}

void check_seeded_cases(Backend& backend) {
  const LossConfig config;
  int positives = 0, conflicts = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    for (auto [size, gts] : {std::pair{128, 12}, std::pair{256, 6}, std::pair{64, 3}})
      for (const AssignerSettings& settings : {config.one2many, config.one2one}) {
        INFO("seed " << seed << ", " << size << " px, up to " << gts << " gts, topk " << settings.topk
                     << " topk2 " << settings.topk2);
        const auto [p, k] = check_case(backend, make_assign_case(4, size, 5, gts, seed), settings);
        positives += p, conflicts += k;
      }
  INFO("positives " << positives << ", anchors claimed twice " << conflicts);
  CHECK(positives > 500);
  CHECK(conflicts > 10);
}

}  // namespace

TEST_CASE("tal_assign on the cpu backend agrees with the host and dense float64 assigners", "[tal_assign]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_seeded_cases(*backend);
}

TEST_CASE("tal_assign on cuda agrees with the host and dense float64 assigners", "[tal_assign][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_seeded_cases(*backend);
}

// Exact ties, worked by hand: at 64x64 every anchor predicts the pixel box (8, 8, 40, 40) exactly (dyadic
// distances) with logit 0, so all 18 candidates of that gt (centres strictly inside: 16 of stride 8, one of
// 16, one of 32) have the same alignment. A second, identical gt claims the same anchors. Top-k ties go to
// the lower anchor index, conflict ties to the lower gt: gt 0 owns the 10 lowest candidates (cells x, y in
// 1..4 of the stride-8 level, row-major), gt 1 nothing; one-to-one keeps anchor 9 alone.
void check_hand_worked_ties(Backend& backend) {
  AssignCase c;
  c.batch = 1, c.classes = 2, c.image_size = 64;
  c.anchors = make_anchor_grid(64, 64);
  const size_t a = c.anchors.size();
  c.boxes.resize(4 * a);
  c.logits.assign(2 * a, 0.0f);
  for (size_t i = 0; i < a; ++i) {
    const float st = c.anchors.stride[i], ax = c.anchors.x[i], ay = c.anchors.y[i];
    c.boxes[i] = ax - 8 / st, c.boxes[a + i] = ay - 8 / st;
    c.boxes[2 * a + i] = 40 / st - ax, c.boxes[3 * a + i] = 40 / st - ay;
  }
  c.gts = {{{1, 8, 8, 40, 40}, {1, 8, 8, 40, 40}}};
  for (auto [settings, expected] :
       {std::pair{LossConfig{}.one2many, std::vector<int>{9, 10, 11, 12, 17, 18, 19, 20, 25, 26}},
        std::pair{LossConfig{}.one2one, std::vector<int>{9}}}) {
    INFO("topk " << settings.topk << " topk2 " << settings.topk2);
    const DeviceAssignment device = run_device(backend, c, settings);
    std::vector<int> positives;
    for (size_t i = 0; i < a; ++i)
      if (device.gt_of_anchor[i] >= 0) {
        positives.push_back(static_cast<int>(i));
        CHECK(device.gt_of_anchor[i] == 0);
        CHECK(device.claim_count[i] == 2);
        CHECK(device.target_score[i] == Approx(device.target_score[9]).epsilon(0));
      }
    CHECK(positives == expected);
    CHECK(device.target_score[9] >
          0.99);  // align / max align = 1, times the overlap ~1 of an exact prediction
    check_case(backend, c, settings);
  }
}

TEST_CASE("tal_assign tie rules on a hand-worked case (cpu)", "[tal_assign]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_hand_worked_ties(*backend);
}

TEST_CASE("tal_assign tie rules on a hand-worked case (cuda)", "[tal_assign][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_hand_worked_ties(*backend);
}

TEST_CASE("tal_assign is deterministic and handles a batch without gts", "[tal_assign]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const AssignCase c = make_assign_case(3, 128, 4, 10, 9);
  const DeviceAssignment first = run_device(*backend, c, LossConfig{}.one2many);
  const DeviceAssignment second = run_device(*backend, c, LossConfig{}.one2many);
  CHECK(first.gt_of_anchor == second.gt_of_anchor);
  CHECK(first.target_score == second.target_score);  // bitwise: no order-dependent float atomics

  const AssignCase empty = make_assign_case(2, 64, 4, 0, 3);
  const DeviceAssignment none = run_device(*backend, empty, LossConfig{}.one2one);
  CHECK(none.gt_of_anchor == std::vector<int>(none.gt_of_anchor.size(), -1));
  CHECK(none.target_score == std::vector<double>(none.target_score.size(), 0.0));
}

TEST_CASE("tal_assign rejects bad settings and classes", "[tal_assign]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const AssignCase c = make_assign_case(2, 64, 4, 3, 1);
  AssignerSettings settings;
  settings.topk = settings.topk2 = kTalTopkMax + 1;
  CHECK_THROWS_AS(run_device(*backend, c, settings), UsageError);
  CHECK_THROWS_AS(run_device(*backend, make_assign_case(2, 64, 4, 3, 1), AssignerSettings{0, 0}), UsageError);
  AssignCase bad_class = c;
  bad_class.gts[0][0].cls = 4;
  CHECK_THROWS_AS(run_device(*backend, bad_class, LossConfig{}.one2many), UsageError);
  CHECK_THROWS_AS(TalAssignOp(*backend, 48), UsageError);
}
