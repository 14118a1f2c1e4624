// LetterboxResizeOp: letterbox_resize (letterbox_resize.cu) compiled once on a backend and launched for one
// image at a time, in blocks of 256 threads, one per output pixel.
#pragma once
#include <memory>

#include "kernels/preprocess/letterbox_resize_params.cuh"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

class LetterboxResizeOp {
 public:
  explicit LetterboxResizeOp(Backend& backend);
  // Enqueues the letterbox of one image; UsageError for an empty or oversized letterbox.
  void launch(const LetterboxResizeParams& params) const;

 private:
  Backend& backend_;
  std::shared_ptr<Module> module_;
  Kernel kernel_;
};

}  // namespace lab
