// PixelInputOp: the network input from RGB bytes on the device, [B, h, w, 3] bytes -> [B, 3, h, w] floats of
// value / 255 (what pipeline/image's write_nchw does on the host), so that a training batch is uploaded as
// bytes, a quarter of the floats. It launches the kernel family docs/adding-a-kernel.md builds (kernels/image),
// found through the runner registry, with no padding.
#pragma once
#include <memory>

#include "kernels/compiled_kernel.hpp"

namespace lab {

class PixelInputOp {
 public:
  explicit PixelInputOp(Backend& backend);
  void run(const unsigned char* pixels, float* planes, int batch, int height, int width) const;

 private:
  CompiledKernel kernel_;
};

}  // namespace lab
