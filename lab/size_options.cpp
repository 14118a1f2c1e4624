// --imgsz rounding and the per-forward pixel budget.
#include "lab/size_options.hpp"

#include <iostream>
#include <string>

#include "lab/option_checks.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

CLI::Validator imgsz_range() {
  return in_range(kMinImgsz, kMaxImgsz);
}

CLI::Validator batch_range() {
  return in_range(1, kMaxBatch);
}

int rounded_imgsz(int imgsz) {
  const int rounded = (imgsz + 31) / 32 * 32;
  if (rounded != imgsz)
    std::cerr << "lab: warning: --imgsz " << imgsz << " is not a multiple of 32, using " << rounded << "\n";
  return rounded;
}

void check_batch_pixels(int batch, int imgsz) {
  const int64_t pixels = int64_t(batch) * imgsz * imgsz;
  if (pixels > kMaxPixelsPerForward)
    throw UsageError("--batch " + std::to_string(batch) + " at --imgsz " + std::to_string(imgsz) + " is " +
                     std::to_string(pixels) + " pixels per forward; the limit is " +
                     std::to_string(kMaxPixelsPerForward) + " (256 images of 640x640)");
}

}  // namespace lab
