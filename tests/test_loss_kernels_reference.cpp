// The float64 references of the loss kernels: hand-computed CIoU values, the CIoU gradients (constant and
// differentiated alpha) against central finite differences away from ties, the tie convention at exact
// ties, and the BCE reference and its gradient.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_reference.hpp"

using namespace lab;

namespace {

constexpr double kPi = std::numbers::pi;

// The loss as a function of pred, with alpha either differentiated or frozen at its value at `base`.
double ciou_objective(const BoxXywh& pred, const BoxXywh& target, bool full_alpha, const BoxXywh& base) {
  if (full_alpha) return ciou_reference(pred, target).loss;
  return ciou_loss_fixed_alpha(pred, target, ciou_reference(base, target).alpha);
}

// Slope of the objective along pred coordinate k over [pred - lo_step, pred + hi_step] (central when both
// steps are h, one-sided when one is 0).
double slope(const BoxXywh& pred, const BoxXywh& target, bool full_alpha, int k, double lo_step,
             double hi_step) {
  BoxXywh lo = pred, hi = pred;
  lo[k] -= lo_step;
  hi[k] += hi_step;
  return (ciou_objective(hi, target, full_alpha, pred) - ciou_objective(lo, target, full_alpha, pred)) /
         (lo_step + hi_step);
}

// Distance of the pair from every kink of the formula: pairs of pred/target edges that a min, a max or the
// clamped overlap compares, in box units.
double distance_to_kinks(const BoxXywh& p, const BoxXywh& t) {
  double d = 1e300;
  for (int axis = 0; axis < 2; ++axis) {
    const double p1 = p[axis] - p[axis + 2] / 2, p2 = p[axis] + p[axis + 2] / 2;
    const double t1 = t[axis] - t[axis + 2] / 2, t2 = t[axis] + t[axis + 2] / 2;
    d = std::min({d, std::abs(p1 - t1), std::abs(p2 - t2), std::abs(p2 - t1), std::abs(p1 - t2)});
  }
  return d;
}

// `step` is relative to max(1, |coordinate|).
void check_gradient_matches_central_differences(const BoxXywh& pred, const BoxXywh& target, bool full_alpha,
                                                double rel_tol, double step = 1e-6) {
  const BoxXywh g = ciou_gradient_reference(pred, target, 1.0, full_alpha);
  for (int k = 0; k < 4; ++k) {
    const double h = step * std::max(1.0, std::abs(pred[k]));
    const double fd = slope(pred, target, full_alpha, k, h, h);
    INFO("pred " << pred[0] << "," << pred[1] << "," << pred[2] << "," << pred[3] << " target " << target[0]
                 << "," << target[1] << "," << target[2] << "," << target[3] << " coord " << k
                 << (full_alpha ? " full alpha" : " constant alpha") << " reference " << g[k] << " fd "
                 << fd);
    CHECK(std::abs(g[k] - fd) <= rel_tol * std::max(1.0, std::abs(fd)));
  }
}

}  // namespace

TEST_CASE("CIoU reference reproduces hand-computed values", "[loss]") {
  const double eps = kCiouEps;
  SECTION("identical boxes: iou ~ 1, no centre or aspect penalty") {
    const CiouValues c = ciou_reference({5, 5, 2, 2}, {5, 5, 2, 2});
    const double area = 2 * (2 + eps), inter = 2 * 2;  // the overlap height has no eps
    const double iou = inter / (2 * area - inter + eps);
    CHECK(c.iou == Approx(iou).epsilon(1e-15));
    CHECK(c.v == 0.0);
    CHECK(c.alpha == 0.0);
    CHECK(c.loss == Approx(1 - iou).margin(1e-15));
  }
  SECTION("disjoint boxes of one shape: 1 + rho2 / c2") {
    const CiouValues c = ciou_reference({0, 0, 2, 2}, {10, 0, 2, 2});
    CHECK(c.iou == 0.0);
    CHECK(c.v == Approx(0.0).margin(1e-15));
    CHECK(c.loss == Approx(1 + 100.0 / (144 + 4 + eps)).epsilon(1e-12));
  }
  SECTION("crossed 1x2 and 2x1 boxes: iou 1/3 and the aspect term") {
    const CiouValues c = ciou_reference({0, 0, 1, 2}, {0, 0, 2, 1});
    const double uni = 1 * (2 + eps) + 2 * (1 + eps) - 1 + eps;
    const double v = 4 / (kPi * kPi) * std::pow(std::atan(2 / (1 + eps)) - std::atan(1 / (2 + eps)), 2);
    const double alpha = v / (v - 1 / uni + 1 + eps);
    CHECK(c.iou == Approx(1 / uni).epsilon(1e-14));
    CHECK(c.v == Approx(v).epsilon(1e-14));
    CHECK(c.alpha == Approx(alpha).epsilon(1e-14));
    CHECK(c.loss == Approx(1 - (1 / uni - (0 / (8 + eps) + v * alpha))).epsilon(1e-14));
  }
}

TEST_CASE("CIoU reference gradients match central finite differences away from ties", "[loss]") {
  for (uint64_t seed : {1, 2, 3}) {
    const int n = 300;
    const BoxPairs boxes = make_box_pairs(n, "random", seed);
    for (int i = 0; i < n; ++i) {
      const BoxXywh p = box_column(boxes.pred, n, i), t = box_column(boxes.target, n, i);
      // The random family keeps edges 1e-3 apart (less float32 rounding), so no difference straddles a kink.
      REQUIRE(distance_to_kinks(p, t) > 9e-4);
      check_gradient_matches_central_differences(p, t, false, 1e-6);
      check_gradient_matches_central_differences(p, t, true, 1e-6);
    }
  }
}

TEST_CASE("CIoU reference gradients are finite and match differences on thin and zero-area boxes", "[loss]") {
  // Kink-free degenerate shapes: a thin pred crossing the target, a zero-height pred just above it (inside
  // the target's y-range its overlap height would sit on the clamp at 0), a point target inside the pred.
  const BoxXywh thin_pred{10.3, 10.1, 1.0 / 1024, 6.2}, flat_pred{10.3, 13.0, 4.7, 0.0};
  const BoxXywh target{11.0, 9.6, 3.1, 2.7}, point_target{10.2, 10.05, 0.0, 0.0};
  for (bool full : {false, true}) {
    check_gradient_matches_central_differences(thin_pred, target, full, 1e-5);
    // A zero-height pred has h1 = eps: a step beyond eps would make h1 negative, where atan(w1/h1) jumps by
    // pi.
    check_gradient_matches_central_differences(flat_pred, target, full, 1e-5, 1e-9);
    check_gradient_matches_central_differences({10.3, 10.1, 4.7, 3.3}, point_target, full, 1e-5);
  }
}

TEST_CASE("CIoU reference gradient at exact ties is the mean of the one-sided slopes", "[loss]") {
  // Each case has ties (or a clamp at exactly 0) and no nested ties; coordinates are exact binary fractions.
  struct TieCase {
    const char* name;
    BoxXywh pred, target;
  };
  const TieCase cases[] = {
      {"identical boxes (every min/max tied)", {20.5, 30.25, 4.5, 6.0}, {20.5, 30.25, 4.5, 6.0}},
      {"pred inside, sharing the left and top edges", {19.5, 28.75, 2.5, 3.0}, {20.5, 30.25, 4.5, 6.0}},
      {"touching: pred x2 == target x1 (clamp of the overlap at 0)",
       {16.0, 30.0, 4.0, 5.0},
       {20.5, 30.25, 5.0, 6.0}},
      {"zero-width pred inside the target (overlap width exactly 0)",
       {21.0, 30.5, 0.0, 2.0},
       {20.5, 30.25, 4.5, 6.0}},
  };
  for (const TieCase& c : cases)
    for (bool full : {false, true}) {
      const BoxXywh g = ciou_gradient_reference(c.pred, c.target, 1.0, full);
      bool any_kink = false;
      for (int k = 0; k < 4; ++k) {
        const double h = 1e-7;
        const double right = slope(c.pred, c.target, full, k, 0, h),
                     left = slope(c.pred, c.target, full, k, h, 0);
        INFO(c.name << (full ? ", full alpha" : ", constant alpha") << ", coord " << k << ": reference "
                    << g[k] << ", left slope " << left << ", right slope " << right);
        CHECK(std::abs(g[k] - 0.5 * (left + right)) <= 1e-5 * std::max(1.0, std::abs(g[k])));
        any_kink = any_kink || std::abs(right - left) > 1e-3;
      }
      INFO(c.name << ": the case must really sit on a kink for the test to mean anything");
      CHECK(any_kink);
    }
}

TEST_CASE("BCE-with-logits reference: values, stability and gradient", "[loss]") {
  CHECK(bce_with_logits_reference(0.0, 0.3) == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(bce_with_logits_reference(2.0, 1.0) == Approx(std::log1p(std::exp(-2.0))).epsilon(1e-15));
  CHECK(bce_with_logits_reference(-3.0, 0.0) == Approx(std::log1p(std::exp(-3.0))).epsilon(1e-15));
  CHECK(bce_with_logits_reference(100.0, 0.0) == Approx(100.0).epsilon(1e-15));
  CHECK(bce_with_logits_reference(-100.0, 0.0) == Approx(std::exp(-100.0)).epsilon(1e-12));
  CHECK(std::isfinite(bce_with_logits_gradient_reference(-800.0, 0.5)));
  for (double x : {-9.5, -1.25, -0.1, 0.0, 0.7, 3.0, 11.0})
    for (double t : {0.0, 0.2, 0.5, 1.0}) {
      const double h = 1e-6;
      const double fd = (bce_with_logits_reference(x + h, t) - bce_with_logits_reference(x - h, t)) / (2 * h);
      INFO("x " << x << " t " << t);
      CHECK(bce_with_logits_gradient_reference(x, t) == Approx(fd).margin(1e-8));
    }
}

TEST_CASE("classification reference sums over classes in [C, N] layout", "[loss]") {
  const int c = 3, n = 2;
  const std::vector<float> logits{0.5f, -1.0f, 2.0f, 0.0f, -3.0f, 4.0f}, targets{1, 0, 0.5f, 0.25f, 0, 1};
  const auto loss = cls_forward_reference(logits, targets, c, n);
  double anchor1 = 0;
  for (int k = 0; k < c; ++k) anchor1 += bce_with_logits_reference(logits[k * n + 1], targets[k * n + 1]);
  CHECK(loss[1] == Approx(anchor1).epsilon(1e-15));
  const std::vector<float> dy{2.0f, 0.5f};
  const auto d = cls_backward_reference(logits, targets, dy, c, n);
  CHECK(d[2 * n + 1] == Approx(0.5 * (1 / (1 + std::exp(-4.0)) - 1)).epsilon(1e-14));
}
