// DetectDecodeOp: compile once, upload the anchor grid once, launch per call.
#include "kernels/detect/detect_decode_op.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

CompileRequest detect_decode_compile_request() {
  return CompileRequest{kDetectDecodeSource, {}, {kDetectDecodeKernel}};
}

DetectDecodeOp::DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads)
    : backend_(backend), anchors_(int(grid.size())), block_threads_(block_threads) {
  module_ = backend.compile(detect_decode_compile_request());
  kernel_ = module_->kernel(kDetectDecodeKernel);
  anchor_x_ = backend.upload_vector(grid.x);
  anchor_y_ = backend.upload_vector(grid.y);
  strides_ = backend.upload_vector(grid.stride);
}

void DetectDecodeOp::decode(const DeviceBuffer& raw, int batch, const DeviceBuffer& out) const {
  const size_t need = size_t(batch) * 4 * anchors_ * sizeof(float);
  if (raw.bytes() < need || out.bytes() < need)
    throw RuntimeError("detect_decode: buffers of " + std::to_string(raw.bytes()) + "/" +
                       std::to_string(out.bytes()) + " bytes are smaller than B*4*A floats (" +
                       std::to_string(need) + " bytes)");
  decode(raw.as<const float>(), batch, out.as<float>());
}

void DetectDecodeOp::decode(const float* raw_p, int batch, float* out_p) const {
  const float *ax = anchor_x_.as<const float>(), *ay = anchor_y_.as<const float>();
  const float* st = strides_.as<const float>();
  int a = anchors_;
  LaunchConfig cfg;
  cfg.grid = {unsigned((a + block_threads_ - 1) / block_threads_), unsigned(batch), 1};
  cfg.block = {unsigned(block_threads_), 1, 1};
  backend_.launch(kernel_, cfg, kernel_args(raw_p, ax, ay, st, a, out_p));
}

}  // namespace lab
