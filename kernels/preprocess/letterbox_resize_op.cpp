// LetterboxResizeOp: the compile and the launch geometry of letterbox_resize.
#include "kernels/preprocess/letterbox_resize_op.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kThreads = 256;
constexpr const char* kEntry = "letterbox_resize_v1_pixel";

}  // namespace

LetterboxResizeOp::LetterboxResizeOp(Backend& backend)
    : backend_(backend), module_(backend.compile({"preprocess/letterbox_resize.cu", {}, {kEntry}})),
      kernel_(module_->kernel(kEntry)) {}

void LetterboxResizeOp::launch(const LetterboxResizeParams& p) const {
  const long long pixels = (long long)p.dst_h * p.dst_w;
  if (p.dst_h < 1 || p.dst_w < 1 || pixels > 0x3fffffff)
    throw UsageError("letterbox_resize: bad letterbox " + std::to_string(p.dst_w) + "x" + std::to_string(p.dst_h));
  backend_.launch(kernel_, {{unsigned((pixels + kThreads - 1) / kThreads), 1, 1}, {kThreads, 1, 1}},
                  kernel_params(p));
}

}  // namespace lab
