// CPU references of the weightless nn ops (max pool, nearest x2 upsample), written from PyTorch's
// definitions, independently of the kernels. Tensors are dense [batch, channels, h, w].
#pragma once
#include <vector>

namespace lab {

// max_pool2d(kernel, stride 1, padding kernel/2) with -inf padding.
std::vector<double> maxpool2d_reference(const std::vector<float>& in, int batch, int channels, int h, int w,
                                        int kernel);
// F.interpolate(scale_factor=2, mode="nearest"): [.., h, w] -> [.., 2h, 2w].
std::vector<double> upsample_nearest2x_reference(const std::vector<float>& in, int batch, int channels, int h,
                                                 int w);

}  // namespace lab
