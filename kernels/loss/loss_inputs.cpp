// Box families and classification inputs for the loss kernels; all randomness from compare.hpp's
// random_uniform, so inputs are reproducible across platforms.
#include "kernels/loss/loss_inputs.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

using Box = std::array<double, 4>;  // cx, cy, w, h

// lo + a whole number of steps below u * (hi - lo): an exact dyadic value when lo and step are dyadic.
double on_grid(double u, double lo, double hi, double step) {
  return lo + std::floor(u * (hi - lo) / step) * step;
}

constexpr double kCentreStep = 1.0 / 256, kSizeStep = 1.0 / 64, kThin = 1.0 / 1024;

// Smallest distance between a pred edge and a target edge along one axis (centres c, sizes s).
double nearest_edges(double pc, double ps, double tc, double ts) {
  const double p1 = pc - ps / 2, p2 = pc + ps / 2, t1 = tc - ts / 2, t2 = tc + ts / 2;
  return std::min({std::abs(p1 - t1), std::abs(p2 - t2), std::abs(p2 - t1), std::abs(p1 - t2)});
}

// Moves the pred centre along one axis until no pred edge is within kEdgeGap of a target edge. Closer edges
// sit on a kink of min/max (or of the clamped overlap) that float32 corners cannot resolve (ulp ~8e-6 at 80
// cells): the kernel would take the other side of the kink than the float64 reference, and the gradient
// jumps there. Exact ties belong to the degenerate family, where both sides see them exactly.
void keep_edges_apart(double& pc, double ps, double tc, double ts) {
  constexpr double kEdgeGap = 1e-3;
  while (nearest_edges(pc, ps, tc, ts) < kEdgeGap) pc += 2.5 * kEdgeGap;
}

// Eight uniforms per anchor: u[0..3] shape the target, u[4..7] the pred.
void random_pair(int i, const float* u, Box& pred, Box& target) {
  target = {u[0] * 80.0, u[1] * 80.0, 0.25 + u[2] * 23.75, 0.25 + u[3] * 23.75};
  if (i % 4 == 3)  // independent boxes, mostly disjoint
    pred = {u[4] * 80.0, u[5] * 80.0, 0.25 + u[6] * 23.75, 0.25 + u[7] * 23.75};
  else
    pred = {target[0] + (u[4] - 0.5) * target[2], target[1] + (u[5] - 0.5) * target[3],
            target[2] * std::exp((u[6] - 0.5) * 1.4), target[3] * std::exp((u[7] - 0.5) * 1.4)};
  keep_edges_apart(pred[0], pred[2], target[0], target[2]);
  keep_edges_apart(pred[1], pred[3], target[1], target[3]);
}

void degenerate_pair(int i, const float* u, Box& pred, Box& target) {
  target = {on_grid(u[0], 16, 64, kCentreStep), on_grid(u[1], 16, 64, kCentreStep),
            on_grid(u[2], 1, 16, kSizeStep), on_grid(u[3], 1, 16, kSizeStep)};
  const double cx = target[0], cy = target[1], w = target[2], h = target[3];
  const double jitter_x = on_grid(u[4], -2, 2, kCentreStep), jitter_y = on_grid(u[5], -2, 2, kCentreStep);
  const double size = on_grid(u[6], 1, 16, kSizeStep);
  switch (i % 8) {
    case 0:  // zero-width pred
      pred = {cx + jitter_x, cy + jitter_y, 0, size};
      break;
    case 1:  // zero-height pred
      pred = {cx + jitter_x, cy + jitter_y, size, 0};
      break;
    case 2:  // identical
      pred = target;
      break;
    case 3: {  // disjoint beyond the right or top edge, or exactly touching it (gap 0)
      const double gap = u[4] < 0.3f ? 0.0 : on_grid((u[4] - 0.3) / 0.7, kSizeStep, 4, kSizeStep);
      if (u[7] < 0.5f)
        pred = {cx + w / 2 + gap + size / 2, cy + jitter_y, size, h};
      else
        pred = {cx + jitter_x, cy - h / 2 - gap - size / 2, w, size};
      break;
    }
    case 4: {  // pred inside the target, sharing its left and/or top edge half of the time
      const double pw = w * (u[4] < 0.5f ? 0.5 : 0.25), ph = h * (u[5] < 0.5f ? 0.75 : 0.5);
      pred = {u[6] < 0.5f ? cx - w / 2 + pw / 2 : cx, u[7] < 0.5f ? cy - h / 2 + ph / 2 : cy, pw, ph};
      break;
    }
    case 5:  // target inside the pred
      pred = {cx + on_grid(u[4], -w / 2, w / 2, kCentreStep) / 2,
              cy + on_grid(u[5], -h / 2, h / 2, kCentreStep) / 2, 2 * w, 1.5 * h + 1};
      break;
    case 6:  // very thin pred, aspect 1:1024 to 1:16384
      if (u[7] < 0.5f)
        pred = {cx + jitter_x, cy + jitter_y, kThin, size};
      else
        pred = {cx + jitter_x, cy + jitter_y, size, kThin};
      break;
    default:  // zero-area target: a point or a line
      target[2] = u[7] < 0.67f ? 0.0 : w;
      target[3] = u[7] < 0.33f || u[7] >= 0.67f ? 0.0 : h;
      pred = {cx + jitter_x, cy + jitter_y, size, h};
      break;
  }
}

}  // namespace

const std::vector<std::string>& box_mixes() {
  static const std::vector<std::string> mixes = {"random", "degenerate"};
  return mixes;
}

BoxPairs make_box_pairs(int n, const std::string& box_mix, uint64_t seed) {
  if (std::find(box_mixes().begin(), box_mixes().end(), box_mix) == box_mixes().end())
    throw UsageError("unknown BOX_MIX '" + box_mix + "' (valid: random, degenerate)");
  const bool degenerate = box_mix == "degenerate";
  const std::vector<float> u =
      random_uniform(size_t(n) * 8, 0.0f, 1.0f, derive_seed(seed, "boxes/" + box_mix));
  BoxPairs out;
  out.pred.resize(4 * size_t(n));
  out.target.resize(4 * size_t(n));
  for (int i = 0; i < n; ++i) {
    Box pred, target;
    if (degenerate)
      degenerate_pair(i, &u[size_t(i) * 8], pred, target);
    else
      random_pair(i, &u[size_t(i) * 8], pred, target);
    for (int k = 0; k < 4; ++k) {
      out.pred[size_t(k) * n + i] = float(pred[k]);
      out.target[size_t(k) * n + i] = float(target[k]);
    }
  }
  return out;
}

ClsInputs make_cls_inputs(int c, int n, uint64_t seed) {
  const size_t count = size_t(c) * n;
  return {random_uniform(count, -12.0f, 12.0f, derive_seed(seed, "cls/logits")),
          random_uniform(count, 0.0f, 1.0f, derive_seed(seed, "cls/targets"))};
}

std::vector<float> make_loss_weights(int n, uint64_t seed) {
  return random_uniform(size_t(n), 0.25f, 2.0f, derive_seed(seed, "loss/dy"));
}

}  // namespace lab
