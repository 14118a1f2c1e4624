// PixelInputOp: one launch of letterbox_nchw_v1_pixel with the image filling its letterbox.
#include "pipeline/executor/pixel_input.hpp"

#include <string>

#include "kernels/image/letterbox_nchw_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {
constexpr unsigned kBlock = 256;
}

PixelInputOp::PixelInputOp(Backend& backend)
    : kernel_(backend, Registry::instance().get("letterbox_nchw").spec(), "v1_pixel", "letterbox_nchw_v1_pixel") {}

void PixelInputOp::run(const unsigned char* pixels, float* planes, int batch, int height, int width) const {
  if (batch < 1 || batch > 65535) throw UsageError("pixel input: batch " + std::to_string(batch) + " out of 1..65535");
  LetterboxNchwParams p{};
  p.image = pixels, p.out = planes;
  p.src_h = p.dst_h = height, p.src_w = p.dst_w = width;
  const size_t plane = size_t(height) * size_t(width);
  kernel_.launch({{unsigned((plane + kBlock - 1) / kBlock), unsigned(batch), 1}, {kBlock, 1, 1}}, p);
}

}  // namespace lab
