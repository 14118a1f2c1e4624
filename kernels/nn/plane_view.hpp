// PlaneView: how every nn op addresses a float32 activation [B, C, H, W] whose H*W planes are contiguous:
// element (b, c, p) lives at data[b * batch_stride + c * channel_stride + p]. A producer writes straight into
// its channel slice of a concatenation buffer (data offset by c0 * H * W, batch stride C_total * H * W), a
// consumer reads a channel split without a copy, and the detect head's last 1x1 convs write into their
// anchor range of [B, 4, A] / [B, nc, A] (data offset by the level's first anchor, channel stride A).
#pragma once
#include <cstdint>

#include "kernels/nn/nn_params.cuh"

namespace lab {

struct PlaneView {
  float* data = nullptr;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;

  // The view of channels [c0, ...) of this one.
  PlaneView channels_from(int c0) const { return {data + c0 * channel_stride, batch_stride, channel_stride}; }
};

struct ConstPlaneView {
  const float* data = nullptr;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;

  ConstPlaneView() = default;
  ConstPlaneView(const float* d, int64_t batch, int64_t channel)
      : data(d), batch_stride(batch), channel_stride(channel) {}
  ConstPlaneView(const PlaneView& v)  // NOLINT: a writable view reads as well
      : data(v.data), batch_stride(v.batch_stride), channel_stride(v.channel_stride) {}

  ConstPlaneView channels_from(int c0) const {
    return {data + c0 * channel_stride, batch_stride, channel_stride};
  }
};

// A dense [B, channels, plane] tensor at `data`.
inline PlaneView dense_view(float* data, int channels, int64_t plane) {
  return {data, int64_t(channels) * plane, plane};
}
inline ConstPlaneView dense_view(const float* data, int channels, int64_t plane) {
  return {data, int64_t(channels) * plane, plane};
}

// The view as a kernel parameter (nn_params.cuh).
inline PlaneIn kernel_view(ConstPlaneView v) {
  return {v.data, v.batch_stride, v.channel_stride};
}
inline PlaneOut kernel_view(PlaneView v) {
  return {v.data, v.batch_stride, v.channel_stride};
}

}  // namespace lab
