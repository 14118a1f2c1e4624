// DetectDecodeOp: the detect-decode kernel as an op. The anchor grid is uploaded once, at construction
// (model load); each call only launches.
#pragma once
#include <memory>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/detect/anchor_grid.hpp"

namespace lab {

inline constexpr const char* kDetectDecodeSource = "detect/detect_decode.cu";
inline constexpr const char* kDetectDecodeKernel = "detect_decode_v1_fused";

// The module an op compiles (for compiling it ahead, beside other modules).
CompileRequest detect_decode_compile_request();

class DetectDecodeOp {
 public:
  DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads = 256);
  // raw [B, 4, A] -> out [B, 4, A] (cx, cy, w, h in pixels), both device buffers of B*4*A floats.
  void decode(const DeviceBuffer& raw, int batch, const DeviceBuffer& out) const;
  // The same on raw device pointers (views into an activation arena), sizes the caller's responsibility.
  void decode(const float* raw, int batch, float* out) const;
  int anchors() const { return anchors_; }
  const Module& module() const { return *module_; }

 private:
  Backend& backend_;
  std::shared_ptr<Module> module_;
  Kernel kernel_;
  DeviceBuffer anchor_x_, anchor_y_, strides_;
  int anchors_ = 0;
  int block_threads_ = 256;
};

}  // namespace lab
