// nn_backward_kernels: the one module of the weightless layers' backward kernels, compiled once per backend
// by NnBackwardKernels (plane_backward_ops.cpp): maxpool2d_backward, upsample_nearest2x_backward, add_planes.
// Each kernel's layout, grid, tie rule and determinism are described in its own file.
#include "nn/add_planes.cu"
#include "nn/maxpool2d_backward.cu"
#include "nn/upsample_nearest2x_backward.cu"
