// PlaneView: how every nn op addresses a float32 activation [B, C, H, W] whose H*W planes are contiguous:
// element (b, c, p) lives at data[b * batch_stride + c * channel_stride + p]. A producer writes straight into
// its channel slice of a concatenation buffer (data offset by c0 * H * W, batch stride C_total * H * W), a
// consumer reads a channel split without a copy, and the detect head's last 1x1 convs write into their
// anchor range of [B, 4, A] / [B, nc, A] (data offset by the level's first anchor, channel stride A).
#pragma once
#include <cstdint>
#include <optional>

#include "kernels/common/half_type.hpp"
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

// Where a conv writes its pre-activation z (Conv2dOp::run) for the SiLU backward: floats (half nullopt), or
// z rounded to the 16-bit type `half` (the 16-bit training forward's copy); strides in elements.
struct PreView {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;
  std::optional<HalfType> half;

  PreView() = default;
  PreView(void* d, int64_t batch, int64_t channel, std::optional<HalfType> type)
      : data(d), batch_stride(batch), channel_stride(channel), half(type) {}
  PreView(const PlaneView& v)  // NOLINT: a float view is a float pre-activation
      : data(v.data), batch_stride(v.batch_stride), channel_stride(v.channel_stride) {}
};

// The kernels' code for a pre-activation's element type (PreOut::type): kPreFloat, LAB_F16 (0), LAB_BF16 (1).
inline int pre_kernel_type(std::optional<HalfType> half) {
  if (!half) return kPreFloat;
  return *half == HalfType::f16 ? 0 : 1;
}

inline PreOut kernel_view(const PreView& v) {
  return {v.data, v.batch_stride, v.channel_stride, pre_kernel_type(v.half)};
}

}  // namespace lab
