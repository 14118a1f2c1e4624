// Conv2dShape: the static shape of one Conv2d layer (weight [c_out, c_in/groups, kernel, kernel], padding
// kernel/2, optional SiLU), shared by Conv2dOp and the CPU reference.
#pragma once
#include <optional>

#include "kernels/common/half_type.hpp"

namespace lab {

struct Conv2dShape {
  int c_in = 1, c_out = 1, kernel = 1, stride = 1, groups = 1;
  bool silu = true;

  int out_size(int in_size) const { return (in_size + 2 * (kernel / 2) - kernel) / stride + 1; }
  long long weight_count() const { return (long long)c_out * (c_in / groups) * kernel * kernel; }
  bool depthwise() const { return groups == c_in && groups == c_out; }
};

// Where an op keeps a copy of its weights (float32, or the 16-bit operands of v5 / v6), so that training can
// rewrite them in place: element (o, i, t) of [c_out, c_in/groups, kernel*kernel] at
// data[o * out_stride + i * in_stride + t * tap_stride].
struct ConvWeightLayout {
  void* data = nullptr;
  long long out_stride = 0, in_stride = 0, tap_stride = 0;
  std::optional<HalfType> half;  // the 16-bit type of data's elements (v5_fp16 / v6_bf16); float32 without
};

}  // namespace lab
