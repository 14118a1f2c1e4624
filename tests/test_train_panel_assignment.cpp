// The Train panel's assignment view (pipeline/train/assignment_view): yolo26n's both heads on a seeded 96x96
// image with four labels (one small enough for STAL's widening), the device assignment regrouped per box
// against the host float64 assigner on the same head outputs (the same positives, scores to float64
// rounding), against the loss (Yolo26Loss's positives per head), and against the rules of the assignment
// itself (every positive's centre inside its possibly widened box, at most one one-to-one positive per box,
// positions on the anchor grid of the stated level); bad input. The [gpu] twin: the same on cuda.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/compare.hpp"
#include "kernels/loss/host_assigner.hpp"
#include "pipeline/loss/yolo26_loss.hpp"
#include "pipeline/train/assignment_view.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using namespace lab::train;

namespace {

constexpr int kSize = 96;

const std::vector<loss::GtBox>& labels() {
  static const std::vector<loss::GtBox> boxes = {
      {0, 4, 6, 50, 70}, {5, 30, 20, 90, 60}, {2, 60, 64, 92, 94}, {7, 40, 72, 45, 77}};  // the last: 5 px
  return boxes;
}

// The anchor's centre inside the box, sides below small_side widened to widened_side about the centre (STAL).
bool centre_inside(const PositiveAnchor& p, const loss::GtBox& g, const loss::AssignerSettings& s) {
  const auto span = [&](double lo, double hi) {
    if (hi - lo >= s.small_side) return std::pair{lo, hi};
    const double c = (lo + hi) / 2;
    return std::pair{c - s.widened_side / 2, c + s.widened_side / 2};
  };
  const auto [x1, x2] = span(g.x1, g.x2);
  const auto [y1, y2] = span(g.y1, g.y2);
  return p.x > x1 && p.x < x2 && p.y > y1 && p.y < y2;
}

// The host assigner's positives of one head as (anchor -> (gt, score)).
std::map<int, std::pair<int, double>> host_positives(const loss::HeadOutputs& head, int nc,
                                                     const loss::AssignerSettings& settings) {
  std::map<int, std::pair<int, double>> out;
  const loss::ImageHead image{head.boxes.data(), head.scores.data(), nc};
  for (const loss::Positive& p : assign_image(make_anchor_grid(kSize, kSize), image, labels(), settings))
    out[p.anchor] = {p.gt, p.score};
  return out;
}

// One head of the view against the host assigner and the assignment's rules; returns its positives.
int check_head(const AssignmentView& view, std::vector<PositiveAnchor> BoxAssignment::*member,
               const loss::HeadOutputs& head, int nc, const loss::AssignerSettings& settings) {
  const std::map<int, std::pair<int, double>> host = host_positives(head, nc, settings);
  std::map<int, std::pair<int, double>> device;
  for (size_t g = 0; g < view.boxes.size(); ++g) {
    const BoxAssignment& box = view.boxes[g];
    CHECK(int((box.*member).size()) <= settings.topk2);
    for (const PositiveAnchor& p : box.*member) {
      INFO("gt " << g << ", anchor " << p.anchor << " at (" << p.x << ", " << p.y << "), stride "
                 << p.stride);
      CHECK(centre_inside(p, box.box, settings));
      CHECK(p.stride == (8 << p.level));
      CHECK(std::fmod(p.x / p.stride, 1.0) == 0.5);
      CHECK(std::fmod(p.y / p.stride, 1.0) == 0.5);
      CHECK(p.align > 0);
      CHECK(p.overlap > 0);
      CHECK(p.overlap <= 1);
      CHECK(p.score > 0);
      device[p.anchor] = {int(g), p.score};
    }
  }
  REQUIRE(device.size() == host.size());
  for (const auto& [anchor, want] : host) {
    INFO("anchor " << anchor);
    REQUIRE(device.count(anchor) == 1);
    CHECK(device[anchor].first == want.first);
    CHECK(std::abs(device[anchor].second - want.second) <= 1e-12 * want.second);
  }
  return int(device.size());
}

void check_view_on(const std::string& backend_name) {
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: the yolo26n checkpoint is absent");
    return;
  }
  auto backend = make_backend(backend_name, test::embedded_context());
  const std::vector<float> image = random_uniform(size_t(3) * kSize * kSize, 0.0f, 1.0f, 31);
  const loss::LossConfig config;
  const ImageHeads heads = forward_heads(*model, image, kSize, kSize);
  const AssignmentView view = assign_heads(*backend, heads, kSize, kSize, labels(), config);
  REQUIRE(view.boxes.size() == labels().size());
  CHECK(view.height == kSize);
  CHECK(view.width == kSize);

  const int nc = heads.num_classes;
  const int o2m = check_head(view, &BoxAssignment::one2many, heads.one2many, nc, config.one2many);
  const int o2o = check_head(view, &BoxAssignment::one2one, heads.one2one, nc, config.one2one);
  CHECK(o2m == view.one2many_positives);
  CHECK(o2o == view.one2one_positives);
  // The test means something only when several boxes have positives in both heads.
  CHECK(o2m > int(labels().size()));
  CHECK(o2o >= 2);

  loss::LossBatch batch;
  batch.num_classes = nc;
  batch.image_height = batch.image_width = kSize;
  batch.anchors = make_anchor_grid(kSize, kSize);
  batch.one2many = heads.one2many, batch.one2one = heads.one2one;
  batch.ground_truth = {labels()};
  const loss::LossResult result = loss::Yolo26Loss(*backend, config).compute(batch);
  CHECK(result.one2many.positives == view.one2many_positives);
  CHECK(result.one2one.positives == view.one2one_positives);

  // assignment_view is the two steps together.
  const AssignmentView whole = assignment_view(*backend, *model, image, kSize, kSize, labels(), config);
  CHECK(whole.one2many_positives == view.one2many_positives);
  CHECK(whole.one2one_positives == view.one2one_positives);
  WARN(backend_name << ": " << o2m << " one-to-many and " << o2o << " one-to-one positives for "
                    << labels().size() << " boxes");
}

}  // namespace

TEST_CASE("assignment view: yolo26n's positives per box equal the host assigner's and the loss's (cpu)",
          "[train_panel]") {
  check_view_on("cpu");
}

TEST_CASE("assignment view: yolo26n's positives per box equal the host assigner's and the loss's (cuda)",
          "[train_panel][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_view_on("cuda");
}

TEST_CASE("assignment view: bad input is a usage error", "[train_panel]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Yolo26Model without_one2many =
      Yolo26Model::from_checkpoint(test::synthetic_checkpoint({.scale = "n", .nc = 3}));
  const std::vector<float> image(size_t(3) * 64 * 64, 0.5f);
  CHECK_THROWS_AS(forward_heads(without_one2many, image, 64, 64), UsageError);
  CHECK_THROWS_AS(forward_heads(without_one2many, std::vector<float>(10), 64, 64), UsageError);

  const AnchorGrid grid = make_anchor_grid(64, 64);
  ImageHeads heads;
  heads.num_classes = 3;
  heads.one2many = heads.one2one = {std::vector<float>(4 * grid.size()), std::vector<float>(3 * grid.size())};
  const loss::LossConfig config;
  CHECK_THROWS_AS(assign_heads(*backend, heads, 64, 64, {{3, 1, 1, 20, 20}}, config), UsageError);  // class 3
  CHECK_THROWS_AS(assign_heads(*backend, heads, 96, 64, {{0, 1, 1, 20, 20}}, config), UsageError);  // size
  const AssignmentView empty = assign_heads(*backend, heads, 64, 64, {}, config);
  CHECK(empty.boxes.empty());
  CHECK(empty.one2many_positives == 0);
}
