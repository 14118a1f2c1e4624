// Activations of the kernel executor: [B, C, H, W] float32 views into the arena
// whose H*W planes are contiguous, addressed by a batch and a channel stride (a
// channel slice of a concatenation, or the anchor range of a detect-head
// output, is a view like any other). The arena is sized by a first, measuring
// pass of the same plan builder, then allocated once per input shape.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/nn/plane_view.hpp"

namespace lab {

struct Activation {
  float* data = nullptr;
  int64_t batch_stride = 0, channel_stride = 0;
  int batch = 0, channels = 0, height = 0, width = 0;

  int64_t plane() const { return int64_t(height) * width; }
  PlaneView view() const { return {data, batch_stride, channel_stride}; }
  ConstPlaneView cview() const { return {data, batch_stride, channel_stride}; }
  // Channels [first, first + count) of this view.
  Activation slice(int first, int count) const;
  bool contiguous() const { return channel_stride == plane() && batch_stride == channels * plane(); }
};

// A bump allocator over one device allocation. In the measuring pass (no buffer
// yet) it hands out offsets from a fake base and only counts; `allocate` then
// makes the real block and the plan is built again.
class Arena {
 public:
  float* take(size_t floats);
  Activation take_activation(int batch, int channels, int height, int width);
  size_t used_bytes() const { return used_; }
  void allocate(Backend& backend);  // one block of used_bytes(); resets the cursor
  bool measuring() const { return block_.get() == nullptr; }

 private:
  DeviceBuffer block_;
  size_t used_ = 0;
};

}  // namespace lab
