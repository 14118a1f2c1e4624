// The detect-decode spec, and its op: compile once, upload the anchor grid once, launch per call.
#include "kernels/detect/detect_decode_op.hpp"

#include "kernels/detect/detect_decode_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

const KernelSpec& detect_decode_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "detect_decode",
      .family = "detect",
      .description = "raw LTRB [B,4,A] + anchor grid -> decoded cx,cy,w,h [B,4,A] (fused)",
      .source = "detect/detect_decode.cu",
      .variants = {{"v1_fused", "one thread per anchor, coalesced loads/stores"}},
      .params = {{"B", K::Int, "1", "batch size", 1, 1024},
                 {"IMG_H", K::Int, "640", "input height in pixels (multiple of 32)", 32, 8192},
                 {"IMG_W", K::Int, "640", "input width in pixels (multiple of 32)", 32, 8192},
                 {"BLOCK", K::Int, "256", "threads per block", 32, 1024, true}},
      .entries = {"detect_decode_v1_fused"},
      .validate = [](const Params& p) {
        for (const char* k : {"IMG_H", "IMG_W"})
          if (param_int(p, k) % 32 != 0)
            throw UsageError(std::string("parameter ") + k + "=" + p.at(k) +
                             " of detect_decode is invalid: must be a multiple of 32 (the largest stride)");
      }};
  return spec;
}

DetectDecodeOp::DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads)
    : backend_(backend),
      module_(backend.compile(detect_decode_spec().compile_request("v1_fused", {}))),
      kernel_(module_->kernel("detect_decode_v1_fused")),
      anchor_x_(backend.upload_vector(grid.x)),
      anchor_y_(backend.upload_vector(grid.y)),
      strides_(backend.upload_vector(grid.stride)),
      anchors_(int(grid.size())),
      block_threads_(block_threads) {}

void DetectDecodeOp::decode(const float* raw, int batch, float* out) const {
  const DetectDecodeParams p{raw,  anchor_x_.as<const float>(), anchor_y_.as<const float>(),
                             strides_.as<const float>(), out, anchors_};
  const unsigned blocks = unsigned((anchors_ + block_threads_ - 1) / block_threads_);
  backend_.launch(kernel_, {{blocks, unsigned(batch), 1}, {unsigned(block_threads_), 1, 1}}, kernel_params(p));
}

}  // namespace lab
