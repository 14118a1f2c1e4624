// nn_kernels: the one module of every nn kernel, compiled once per backend by NnKernels (nn_kernels.cpp lists
// the name expressions: conv2d_direct, conv2d_tiled<K, TM>, conv2d_tf32<K, TM> and conv2d_depthwise<K> for
// K = 1, 3, 5, maxpool2d, upsample_nearest2x, copy_planes). Each kernel's layout, grid and variants are
// described in its own file.
#include "nn/conv2d.cu"
#include "nn/copy_planes.cu"
#include "nn/maxpool2d.cu"
#include "nn/upsample_nearest2x.cu"
