// Seeded random inputs of the loss kernels: box pairs from a named family (BOX_MIX) and classification
// logits with soft targets, and the upstream gradient. Shared by the runners and the tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

// "random": overlapping jittered pairs plus some independent (mostly disjoint) ones, coordinates in grid
// cells as the loss sees them; no pred edge lies within 1e-3 cells of a target edge (closer is a kink that
// float32 cannot resolve, see loss_inputs.cpp). "degenerate": anchors cycle through zero-width and
// zero-height preds, identical pairs, disjoint and exactly touching pairs, one box inside the other
// (sometimes sharing an edge), very thin preds (aspect 1:1024 to 1:16384) and zero-area (point or line)
// targets; every value is a dyadic fraction (a multiple of 2^-10 or finer) small enough that the corner
// conversion is exact in float32, so ties are ties in both the kernel and the reference.
// A function-local static, so that specs built during static initialisation can read it.
const std::vector<std::string>& box_mixes();

struct BoxPairs {
  std::vector<float> pred, target;  // each [4, N], rows cx, cy, w, h
};
BoxPairs make_box_pairs(int n, const std::string& box_mix, uint64_t seed);

struct ClsInputs {
  std::vector<float> logits, targets;  // each [C, N]
};
// Logits in [-12, 12) (both saturated tails), soft targets in [0, 1).
ClsInputs make_cls_inputs(int c, int n, uint64_t seed);

// Upstream gradient of each anchor's loss: positive weights in [0.25, 2) like the loss's score weights.
std::vector<float> make_loss_weights(int n, uint64_t seed);

// The upstream gradient dy [N] of a backward runner: make_loss_weights on the host, for the reference, and on
// the device.
struct UpstreamGradient {
  UpstreamGradient(Backend& backend, int n, uint64_t seed)
      : host(make_loss_weights(n, seed)), device(backend.upload_vector(host)) {}
  std::vector<float> host;
  DeviceBuffer device;
};

}  // namespace lab
