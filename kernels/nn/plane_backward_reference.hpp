// CPU references of the weightless layers' backward, float64, written from PyTorch's definitions as scatters
// (each output's gradient sent to where it came from), independently of the kernels' gathers. Tensors are
// dense [batch, channels, h, w].
#pragma once
#include <vector>

namespace lab {

// The input gradient of max_pool2d(kernel, stride 1, padding kernel/2): each window's dy added to the cell
// PyTorch's CUDA max_pool2d picks (the first maximum in row-major scan order; a NaN replaces the maximum).
std::vector<double> maxpool2d_backward_reference(const std::vector<float>& in,
                                                 const std::vector<float>& grad_out, int batch, int channels,
                                                 int h, int w, int kernel);
// The input gradient of F.interpolate(scale_factor=2, mode="nearest"): grad_out [.., 2h, 2w] -> [.., h, w].
std::vector<double> upsample_nearest2x_backward_reference(const std::vector<float>& grad_out, int batch,
                                                          int channels, int h, int w);

}  // namespace lab
