// Parameters of the weightless nn kernels (maxpool2d.cu, upsample_nearest2x.cu, copy_planes.cu), shared by
// the kernels and the ops that launch them (plane_ops.hpp): plain data, passed by value, each struct exactly
// what its kernel reads (the kernels' files give the layouts).
// A tensor is a view: element (b, c, p) at data[b * batch_stride + c * channel_stride + p] (plane_view.hpp).
#pragma once

namespace lab {

struct PlaneIn {
  const float* data;
  long long batch_stride, channel_stride;
};

struct PlaneOut {
  float* data;
  long long batch_stride, channel_stride;
};

struct MaxPool2dParams {
  PlaneIn in;
  PlaneOut out;
  int h, w, kernel;  // plane h x w (in and out), window kernel x kernel (odd)
};

struct UpsampleNearest2xParams {
  PlaneIn in;
  PlaneOut out;
  int h_in, w_in;  // the input plane; out is 2 h_in x 2 w_in
};

struct CopyPlanesParams {
  PlaneIn in;
  PlaneOut out;
  int plane;  // elements per channel plane
};

}  // namespace lab
