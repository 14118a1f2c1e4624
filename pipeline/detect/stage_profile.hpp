// Where the time of `lab detect` over many images goes (printed with --verbose): the busy time of each stage
// summed over the threads that run it, per image, grouped by the threads the stages share (the host workers:
// decode, letterbox, draw, encode, and with --encode nvjpeg the GPU encode they wait for; the forward workers:
// upload, forward, top-k; the writer threads: write).
// A group of T threads that is busy S ms per image can sustain at most T x 1000 / S images/s; the group with
// the lowest such rate is the critical one, and its largest stage is what to make faster.
#pragma once
#include <array>
#include <cstddef>
#include <mutex>
#include <string>

namespace lab {

enum class Stage { Decode, Letterbox, Draw, Encode, GpuEncode, Write, Upload, Forward, TopK };
constexpr size_t kStageCount = 9;

class StageProfile {
 public:
  // Thread-safe.
  void add(Stage stage, double ms);
  // The report over `images` images: each group (its thread count given) with its stages in ms per image
  // and the rate it could sustain, then the critical group and stage. The GPU encode is listed only when a
  // run had it.
  std::string report(size_t images, int host_threads, int forward_threads, int writer_threads) const;

 private:
  mutable std::mutex mutex_;
  std::array<double, kStageCount> total_ms_{};
};

}  // namespace lab
