// make_assign_case: seeded boxes of four kinds and head outputs fitted to them (see assign_inputs.hpp), and
// AssignProblem, its uploaded form.
#include "kernels/loss/assign_inputs.hpp"

#include <algorithm>
#include <string>

#include "kernels/compare.hpp"

namespace lab {
namespace {

// Gt g of an image from five uniforms u: kind g % 4 is a normal box, a tiny one (a side under 8 px: STAL),
// a jittered copy of the previous box (overlap), or one touching the image border.
loss::GtBox make_gt(const float* u, int g, const std::vector<loss::GtBox>& earlier, int size, int classes) {
  const double s = size;
  double w = 16 + u[0] * (s / 2 - 16), h = 16 + u[1] * (s / 2 - 16);
  double x1 = u[2] * (s - w), y1 = u[3] * (s - h);
  switch (g % 4) {
    case 1:
      (u[4] < 0.5f ? w : h) = 1 + 6.9 * u[0];
      break;
    case 2:
      if (!earlier.empty()) {
        const loss::GtBox& p = earlier.back();
        w = (p.x2 - p.x1) * (0.8 + 0.4 * u[0]), h = (p.y2 - p.y1) * (0.8 + 0.4 * u[1]);
        x1 = p.x1 + (u[2] - 0.5) * 0.4 * w, y1 = p.y1 + (u[3] - 0.5) * 0.4 * h;
      }
      break;
    case 3:
      x1 = u[2] < 0.5f ? 0 : s - w;
      if (u[3] < 0.5f) y1 = u[4] < 0.5f ? 0 : s - h;
      break;
    default:
      break;
  }
  x1 = std::clamp(x1, 0.0, s - 1), y1 = std::clamp(y1, 0.0, s - 1);
  return {static_cast<int>(u[4] * classes) % classes, x1, y1, std::min(x1 + w, s), std::min(y1 + h, s)};
}

}  // namespace

AssignCase make_assign_case(int batch, int image_size, int classes, int max_gts, uint64_t seed) {
  AssignCase c;
  c.batch = batch, c.classes = classes, c.image_size = image_size;
  c.anchors = make_anchor_grid(image_size, image_size);
  const size_t a = c.anchors.size();
  const std::vector<float> counts =
      random_uniform(size_t(batch), 0.0f, 1.0f, derive_seed(seed, "assign/counts"));
  const std::vector<float> u =
      random_uniform(size_t(batch) * std::max(max_gts, 1) * 5, 0.0f, 1.0f, derive_seed(seed, "assign/gts"));
  for (int b = 0; b < batch; ++b) {
    const int count = b == 0   ? max_gts
                      : b == 1 ? 0
                               : static_cast<int>(counts[b] * (max_gts + 1)) % (max_gts + 1);
    std::vector<loss::GtBox> gts;
    for (int g = 0; g < count; ++g)
      gts.push_back(make_gt(&u[(size_t(b) * max_gts + g) * 5], g, gts, image_size, classes));
    c.gts.push_back(gts);
  }
  c.boxes = random_uniform(size_t(batch) * 4 * a, 0.3f, 4.0f, derive_seed(seed, "assign/boxes"));
  c.logits = random_uniform(size_t(batch) * classes * a, -4.0f, 2.0f, derive_seed(seed, "assign/logits"));
  // Most anchors predict a gt's sides with noise: distances from the anchor centre, at least 0.05 cells.
  const std::vector<float> fit =
      random_uniform(size_t(batch) * a * 5, 0.0f, 1.0f, derive_seed(seed, "assign/fit"));
  for (int b = 0; b < batch; ++b) {
    if (c.gts[b].empty()) continue;
    for (size_t i = 0; i < a; ++i) {
      const float* r = &fit[(size_t(b) * a + i) * 5];
      if (r[0] > 0.7f) continue;
      const loss::GtBox& g = c.gts[b][(i * 7 + size_t(b)) % c.gts[b].size()];
      const double st = c.anchors.stride[i], ax = c.anchors.x[i] * st, ay = c.anchors.y[i] * st;
      const double sides[4] = {ax - g.x1, ay - g.y1, g.x2 - ax, g.y2 - ay};
      for (int k = 0; k < 4; ++k)
        c.boxes[(size_t(b) * 4 + k) * a + i] =
            static_cast<float>(std::max(sides[k] / st * (0.75 + 0.5 * r[1 + k]), 0.05));
    }
  }
  return c;
}

AssignProblem::AssignProblem(Backend& backend, const Params& p, uint64_t seed)
    : host(make_assign_case(int(param_int(p, "B")), int(param_int(p, "IMGSZ")), int(param_int(p, "NC")),
                            int(param_int(p, "GTS")), seed)),
      boxes(backend.upload_vector(host.boxes)),
      logits(backend.upload_vector(host.logits)),
      anchors(upload_anchor_grid(backend, host.anchors)),
      gts(upload_ground_truth(backend, host.gts)) {
  settings.topk = int(param_int(p, "TOPK"));
  settings.topk2 = int(param_int(p, "TOPK2"));
}

}  // namespace lab
