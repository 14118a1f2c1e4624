// SlicedBuffer: window upload/download through host copies of the whole buffer, poison checks by bit pattern.
#include "kernels/nn/sliced_buffer.hpp"

#include <cstring>

namespace lab {

namespace {
constexpr uint8_t kPoisonByte = 0xff;  // all-ones bytes: a NaN float
}  // namespace

SlicedBuffer::SlicedBuffer(Backend& backend, int batch, int channels, int64_t plane, int before, int after)
    : backend_(backend),
      batch_(batch),
      channels_(channels),
      before_(before),
      total_channels_(before + channels + after),
      plane_(plane),
      buffer_(backend.alloc_array<float>(size_t(batch) * total_channels_ * plane)) {
  poison();
}

PlaneView SlicedBuffer::view() const {
  return PlaneView{buffer_.as<float>() + before_ * plane_, total_channels_ * plane_, plane_};
}

void SlicedBuffer::poison() {
  backend_.fill_bytes(buffer_.get(), kPoisonByte, buffer_.bytes());
}

std::vector<float> SlicedBuffer::download_all() const {
  std::vector<float> all(size_t(batch_) * total_channels_ * plane_);
  backend_.download(all.data(), buffer_.get(), all.size() * sizeof(float));
  return all;
}

void SlicedBuffer::upload_window(const std::vector<float>& dense) {
  std::vector<float> all(size_t(batch_) * total_channels_ * plane_);
  std::memset(all.data(), kPoisonByte, all.size() * sizeof(float));
  const size_t window = size_t(channels_) * plane_;
  for (int b = 0; b < batch_; ++b)
    std::memcpy(all.data() + (size_t(b) * total_channels_ + before_) * plane_, dense.data() + b * window,
                window * sizeof(float));
  backend_.upload(buffer_.get(), all.data(), all.size() * sizeof(float));
}

std::vector<float> SlicedBuffer::download_window() const {
  const std::vector<float> all = download_all();
  const size_t window = size_t(channels_) * plane_;
  std::vector<float> dense(size_t(batch_) * window);
  for (int b = 0; b < batch_; ++b)
    std::memcpy(dense.data() + b * window, all.data() + (size_t(b) * total_channels_ + before_) * plane_,
                window * sizeof(float));
  return dense;
}

OutputCheck SlicedBuffer::untouched_check(const std::string& name) const {
  const std::vector<float> all = download_all();
  std::vector<float> changed;  // 1 where a neighbour channel lost its poison, else 0
  for (int b = 0; b < batch_; ++b)
    for (int c = 0; c < total_channels_; ++c) {
      if (c >= before_ && c < before_ + channels_) continue;
      const float* p = all.data() + (size_t(b) * total_channels_ + c) * plane_;
      for (int64_t i = 0; i < plane_; ++i) {
        uint32_t bits;
        std::memcpy(&bits, p + i, sizeof bits);
        changed.push_back(bits == 0xffffffffu ? 0.0f : 1.0f);
      }
    }
  return make_check(name, {changed.size()}, changed, std::vector<double>(changed.size(), 0.0),
                    Tolerance{0, 0}, false);
}

}  // namespace lab
