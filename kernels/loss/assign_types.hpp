// The inputs and settings of the task-aligned assignment, shared by the host float64 assigner
// (host_assigner.hpp), the device assigner (tal_assign_op.hpp) and the loss types of pipeline/loss.
#pragma once
#include "kernels/detect/anchor_grid.hpp"

namespace lab::loss {

// One ground-truth object: class and xyxy pixels in the network input.
struct GtBox {
  int cls = 0;
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

struct AssignerSettings {
  int topk = 10;
  int topk2 = 10;  // keep only the best topk2 anchors of each gt after conflict resolution (o2o: 1)
  double alpha = 0.5, beta = 6.0;
  double eps = 1e-9;
  double small_side = 8;     // STAL: a gt side shorter than this (the smallest stride) ...
  double widened_side = 16;  // ... is widened to this (the second stride) for the centre-inside test
};

}  // namespace lab::loss
