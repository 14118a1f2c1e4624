// detect_decode (detect_decode.cu): its spec (the runner's and the op's), the op and the float64 reference.
#pragma once
#include "kernels/compiled_kernel.hpp"
#include "kernels/detect/anchor_grid.hpp"

namespace lab {

const KernelSpec& detect_decode_spec();

// Compiled and the anchor grid uploaded once (at model load); each call only launches.
class DetectDecodeOp {
 public:
  DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads = 256);
  // raw [B, 4, A] (l, t, r, b in grid units) -> out [B, 4, A] (cx, cy, w, h in pixels), device arrays.
  void decode(const float* raw, int batch, float* out) const;

 private:
  CompiledKernel kernel_;
  DeviceBuffer anchor_x_, anchor_y_, strides_;
  int anchors_, block_threads_;
};

// Written from the Detect head's definition (xyxy from anchor -/+ distances, then centre form), independently
// of the kernel's algebra: raw [B, 4, A] -> [B, 4, A] (cx, cy, w, h) in pixels.
std::vector<double> detect_decode_reference(const std::vector<float>& raw, const AnchorGrid& grid, int batch);

}  // namespace lab
