// DetectDecodeOp: the detect-decode kernel (detect_decode.cu) as an op, compiled from the spec the runner is
// made from. The anchor grid is uploaded once, at construction (model load); each call only launches.
#pragma once
#include <memory>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

const KernelSpec& detect_decode_spec();

class DetectDecodeOp {
 public:
  DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads = 256);
  // raw [B, 4, A] -> out [B, 4, A] (cx, cy, w, h in pixels), device arrays of B*4*A floats.
  void decode(const float* raw, int batch, float* out) const;

 private:
  Backend& backend_;
  std::shared_ptr<Module> module_;
  Kernel kernel_;
  DeviceBuffer anchor_x_, anchor_y_, strides_;
  int anchors_, block_threads_;
};

}  // namespace lab
