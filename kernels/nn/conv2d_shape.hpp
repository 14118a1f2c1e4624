// Conv2dShape: the static shape of one Conv2d layer (weight [c_out, c_in/groups, kernel, kernel], padding
// kernel/2, optional SiLU), shared by Conv2dOp and the CPU reference.
#pragma once

namespace lab {

struct Conv2dShape {
  int c_in = 1, c_out = 1, kernel = 1, stride = 1, groups = 1;
  bool silu = true;

  int out_size(int in_size) const { return (in_size + 2 * (kernel / 2) - kernel) / stride + 1; }
  long long weight_count() const { return (long long)c_out * (c_in / groups) * kernel * kernel; }
  bool depthwise() const { return groups == c_in && groups == c_out; }
};

// Where an op keeps a float32 copy of its weights, so that training can rewrite them in place: element
// (o, i, t) of [c_out, c_in/groups, kernel*kernel] at data[o * out_stride + i * in_stride + t * tap_stride].
struct ConvWeightLayout {
  float* data = nullptr;
  long long out_stride = 0, in_stride = 0, tap_stride = 0;
};

}  // namespace lab
