// Parameters of the backward kernels of the weightless nn layers (maxpool2d_backward.cu,
// upsample_nearest2x_backward.cu, add_planes.cu), shared by the kernels and the ops that launch them
// (plane_backward_ops.hpp): plain data, passed by value. Views as nn_params.cuh: element (b, c, p) at
// data[b * batch_stride + c * channel_stride + p]. `accumulate`: 1 adds the result to what the gradient view
// holds (a second contribution), 0 overwrites it (the first, so no memset is needed).
// Include nn_params.cuh first (PlaneIn, PlaneOut): kernels as "nn/nn_params.cuh", host code through
// plane_view.hpp (the two see the tree by different roots).
#pragma once

namespace lab {

struct MaxPool2dBackwardParams {
  PlaneIn in;        // the pool's forward input x [B, C, h, w]
  PlaneIn grad_out;  // dy [B, C, h, w]
  PlaneOut grad_in;  // dx [B, C, h, w]
  int h, w, kernel, accumulate;
};

struct UpsampleNearest2xBackwardParams {
  PlaneIn grad_out;  // dy [B, C, 2 h_in, 2 w_in]
  PlaneOut grad_in;  // dx [B, C, h_in, w_in]
  int h_in, w_in, accumulate;
};

struct AddPlanesParams {
  PlaneIn src;
  PlaneOut dst;  // dst (+)= src over [B, C, plane]
  int plane, accumulate;
};

}  // namespace lab
