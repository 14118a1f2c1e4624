// The parameter struct of kernels/memory/tma_copy.cu (host and device). The kernel takes it as
// `const __grid_constant__` so the tensor maps stay in parameter space for the TMA instructions.
// lab::TensorMap comes from common/lab_tensor_map.cuh, included first: by the kernel, and on the host by
// nvrtc_runtime/tensor_map.hpp (through the backend).
#pragma once

namespace lab {

struct TmaCopyParams {
  // tile: x as [rows][cols] float, box [box_rows][box_cols], swizzled as the variant says; im2col: x NHWC
  // float, box_rows pixels x box_cols channels, bounding box of a 3x3 pad-1 convolution, traversal strides
  // of its stride.
  TensorMap src;
  // tile: y [rows][cols], box [box_rows][box_cols]; im2col: y [N*Ho*Wo][9][C], box [box_rows][1][box_cols].
  TensorMap dst;
  int tiles_x;   // column tiles (tile) or channel tiles (im2col)
  int tiles;     // tiles in all: tiles_x * row tiles (tile), tiles_x * 9 * pixel tiles (im2col)
  int box_cols;  // elements of a box row (4-byte floats)
  int box_rows;  // rows (tile) or pixels (im2col) of a box
  int stages;    // depth of the shared-memory ring, 2-4
  int h, w;      // im2col: image height and width
  int stride;    // im2col: the convolution's stride (1 or 2): (h - 1) / stride + 1 output rows, likewise w
};

}  // namespace lab
