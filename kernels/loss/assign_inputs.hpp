// Seeded assignment problems for the tal_assign runner and the tests: a square input, several images with 0
// to many gts each (normal, tiny (STAL), overlapping and border-touching boxes), raw box distances of which
// most are fitted to a gt with noise (so that gts get positives and compete for anchors), logits in [-4, 2).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/loss/assign_types.hpp"
#include "kernels/loss/tal_assign_op.hpp"

namespace lab {

struct AssignCase {
  int batch = 0, classes = 0, image_size = 0;
  AnchorGrid anchors;
  std::vector<float> boxes, logits;           // [B, 4, A], [B, classes, A]
  std::vector<std::vector<loss::GtBox>> gts;  // per image; image 0 has max_gts, image 1 none
};
AssignCase make_assign_case(int batch, int image_size, int classes, int max_gts, uint64_t seed);

// A runner's problem from the parameters of assign_problem_params (B, IMGSZ, NC, GTS, TOPK, TOPK2): the case
// on the host, its inputs on the device, and the assigner settings.
struct AssignProblem {
  AssignProblem(Backend& backend, const Params& p, uint64_t seed);
  AssignCase host;
  DeviceBuffer boxes, logits;
  DeviceAnchorGrid anchors;
  DeviceGroundTruth gts;
  loss::AssignerSettings settings;
};

}  // namespace lab
