// SlicedBuffer: a device tensor [batch, channels + before + after, plane] of which an op sees only channels
// [before, before + channels) through a PlaneView, so every nn runner exercises strided views. The channels
// outside the window hold NaN poison: an op that reads them spreads NaN into its output, one that writes them
// fails `untouched_check`.
#pragma once
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/compare.hpp"
#include "kernels/nn/plane_view.hpp"

namespace lab {

class SlicedBuffer {
 public:
  SlicedBuffer(Backend& backend, int batch, int channels, int64_t plane, int before = 1, int after = 2);

  PlaneView view() const;
  // Poison everything, then write `dense` ([batch, channels, plane]) into the window.
  void upload_window(const std::vector<float>& dense);
  void poison();                               // NaN bytes everywhere
  std::vector<float> download_window() const;  // [batch, channels, plane]
  // Every element outside the window still holds the poison bytes (a check with zero tolerance).
  OutputCheck untouched_check(const std::string& name) const;
  size_t window_elements() const { return size_t(batch_) * channels_ * plane_; }

 private:
  std::vector<float> download_all() const;
  Backend& backend_;
  int batch_, channels_, before_, total_channels_;
  int64_t plane_;
  DeviceBuffer buffer_;
};

}  // namespace lab
