// Parameters of the kernels of conv2d.cu, maxpool2d.cu, upsample_nearest2x.cu and copy_planes.cu, shared by
// the kernels and the ops that launch them (conv2d_op.hpp, plane_ops.hpp): plain data, passed by value, each
// struct exactly what its kernel reads (the kernels' files give the layouts). conv2d_mma.cu keeps its scalar
// parameters: as a struct, its PTX lost the read-only loads of the input and two instances spilled.
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

// The fused epilogue every conv kernel ends with: out = act(acc + bias[c]) (+ residual when residual.data),
// and pre = acc + bias[c] (the pre-activation the training forward keeps) when pre.data. With gate.data (and
// no activation) out = (acc + bias[c]) * silu'(gate) (+ residual) instead: an input-gradient conv whose
// output is the whole gradient of a SiLU conv's output applies that conv's SiLU backward, gate its z.
struct Conv2dEpilogue {
  const float* bias;  // [C_out]
  PlaneIn residual;
  PlaneOut out, pre;
  PlaneIn gate;
};

struct Conv2dSizes {
  int c_in, c_out, h_in, w_in, h_out, w_out;
};

// conv2d_direct (v1): any kernel size, stride and groups.
struct Conv2dDirectParams {
  PlaneIn in;
  const float* w;  // [C_out, C_in/groups, K, K]
  Conv2dEpilogue epi;
  Conv2dSizes size;
  int kernel, stride, groups, silu;
};

// conv2d_tiled<K, TM> (v2) and conv2d_tf32<K, TM> (v4): the implicit GEMM on float weights.
struct Conv2dGemmParams {
  PlaneIn in;
  const float* wt;  // [C_in*K*K, C_out]: transposed on the host
  Conv2dEpilogue epi;
  Conv2dSizes size;
  int stride, silu, batch;
  int split_rows;  // reduction rows per split (grid z = batch * splits)
  float* partial;  // null: no split-K; else [splits, B, C_out, Ho*Wo]
};

// conv2d_depthwise<K> (v3): groups = C_in = C_out. A CTA's 256 threads cover kDepthwiseTileX output columns
// x (256 / kDepthwiseTileX) * kDepthwiseRows rows, each lane kDepthwiseRows rows of one column.
constexpr int kDepthwiseTileX = 32, kDepthwiseRows = 4;
constexpr int kDepthwiseTileY = 256 / kDepthwiseTileX * kDepthwiseRows;
struct Conv2dDepthwiseParams {
  PlaneIn in;
  const float* w;  // [C, 1, K, K]
  Conv2dEpilogue epi;
  int h_in, w_in, h_out, w_out, stride, silu;
};

// conv2d_splitk_reduce: the epilogue of a split-K implicit GEMM.
struct Conv2dSplitkReduceParams {
  const float* partial;  // [splits, B, C_out, plane_out]
  int splits;
  Conv2dEpilogue epi;
  int batch, c_out, plane_out, silu;
};

}  // namespace lab
