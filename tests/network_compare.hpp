// A kernel network against the CPU reference forward (float64 accumulation): every tensor by relative L2
// under a per-precision bar, the detections above two thirds of K by class, score and box, and the same bits
// from the graph replay and the layer-by-layer run (which times every layer). Shared by the NCHW network's
// tests (test_kernel_network.cpp) and the NHWC network's (test_nhwc_network.cpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/precision.hpp"
#include "nvrtc_runtime/backend.hpp"
#include "pipeline/network.hpp"

namespace lab::test {

struct NetworkTolerance {
  double layer_rel_l2;       // every tensor against the reference
  float score_tol, box_tol;  // detections above two thirds of K: |score diff|, |coordinate diff| (pixels)
  float score_floor = 0.0f;  // ... and above this score
};
// The NCHW network's bars at each precision (float32 activations; the reasons in network_compare.cpp).
NetworkTolerance network_tolerance(Precision p);

// Every tensor of the reference's last forward (but the one-to-many head's) against the kernel network's:
// the same shape, finite, relative L2 under `bar`. Returns the worst tensor's name and error.
std::pair<std::string, double> compare_tensors(Network& reference, Network& kernels, double bar);

void compare_with_reference(const Yolo26Model& model, Backend& backend, const std::vector<float>& input,
                            int batch, int height, int width, Precision precision, LayoutChoice layout,
                            const NetworkTolerance& tol);
// The NCHW network at `precision` with network_tolerance(precision).
void compare_with_reference(const Yolo26Model& model, Backend& backend, const std::vector<float>& input,
                            int batch, int height, int width, Precision precision = Precision::Fp32);

}  // namespace lab::test
