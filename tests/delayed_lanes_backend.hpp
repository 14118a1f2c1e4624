// DelayedLanesBackend: a CountingBackend that runs the launches, fills and transfers of lanes 1..
// (Backend::fork_lane) later than issued, as CUDA streams may: queued per lane with copies of their
// arguments, while the main lane's work runs at once. Schedule::Latest runs a lane's queue, in order, only
// when the lane joins (or the host synchronizes or waits for it): a pass that gives the plain backend's bits
// through it reads and writes nothing from the main lane that a side lane's pending work still needs.
// Schedule::Interleaved also runs the oldest pending launch of each side lane before each main-lane launch,
// so the lanes' work alternates: a pass that gives the same bits then also has no main-lane launch overwrite
// what a side lane wrote and reads later (a shared scratch buffer). It records the lanes each kernel ran on
// and counts forks, joins and side-lane transfers.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nvrtc_runtime/errors.hpp"
#include "tests/counting_backend.hpp"

namespace lab::test {

class DelayedLanesBackend : public CountingBackend {
 public:
  enum class Schedule { Latest, Interleaved };
  explicit DelayedLanesBackend(Backend& inner, Schedule schedule = Schedule::Latest)
      : CountingBackend(inner), schedule_(schedule) {}
  std::map<std::string, std::set<int>> lanes_of;  // by Kernel::name_expression
  size_t forks = 0, joins = 0, side_lane_uploads = 0, side_lane_downloads = 0;
  size_t pending() const {
    size_t n = 0;
    for (const auto& [lane, work] : queued_) n += work.size();
    return n;
  }

  void launch(const Kernel& kernel, const LaunchConfig& config, const KernelArgs& args) override {
    lanes_of[kernel.name_expression].insert(lane_);
    if (lane_ == 0) {
      step_side_lanes();
      return CountingBackend::launch(kernel, config, args);
    }
    std::vector<std::vector<char>> bytes;  // the arguments copied: the caller's go out of scope
    for (size_t i = 0; i < args.pointers.size(); ++i) {
      const char* p = static_cast<const char*>(args.pointers[i]);
      bytes.emplace_back(p, p + args.sizes[i]);
    }
    on_current_lane([this, kernel, config, bytes = std::move(bytes), args]() mutable {
      KernelArgs copy = args;
      for (size_t i = 0; i < bytes.size(); ++i) copy.pointers[i] = bytes[i].data();
      CountingBackend::launch(kernel, config, copy);
    });
  }
  void fill_bytes(void* dst, uint8_t value, size_t bytes) override {
    on_current_lane([this, dst, value, bytes] { CountingBackend::fill_bytes(dst, value, bytes); });
  }
  void upload_async(void* dst, const void* src, size_t bytes) override {
    side_lane_uploads +=
        on_current_lane([this, dst, src, bytes] { CountingBackend::upload_async(dst, src, bytes); });
  }
  void download_async(void* dst, const void* src, size_t bytes) override {
    side_lane_downloads +=
        on_current_lane([this, dst, src, bytes] { CountingBackend::download_async(dst, src, bytes); });
  }
  void fork_lane(int lane) override {
    if (lane < 1) throw RuntimeError("lane " + std::to_string(lane) + " cannot be forked");
    ++forks;
    open_.insert(lane);
  }
  void use_lane(int lane) override {
    if (lane != 0 && !open_.count(lane))
      throw RuntimeError("lane " + std::to_string(lane) + " was not forked");
    lane_ = lane;
  }
  void join_lane(int lane) override {
    if (!open_.count(lane)) return;
    ++joins;
    run_queued(lane);
    open_.erase(lane);
    if (lane_ == lane) lane_ = 0;
  }
  void join_lanes() override {
    while (!open_.empty()) join_lane(*open_.begin());
    lane_ = 0;
  }
  // A side lane's queued work runs on the inner backend's main lane (the inner never sees the forks), so the
  // host waits there: the inner's own lane of that number holds none of it (on cuda, the copy of the loss's
  // sums would still be in flight when read).
  void wait_lane(int lane) override {
    if (lane != 0) run_queued(lane);
    CountingBackend::wait_lane(0);
  }
  void synchronize() override {
    for (auto& [lane, work] : queued_) run_queued(lane);
    CountingBackend::synchronize();
  }

 private:
  // The main lane's work runs at once (after Interleaved's step of the side lanes), a side lane's is queued:
  // returns whether it was queued.
  bool on_current_lane(std::function<void()> work) {
    if (lane_ == 0) {
      step_side_lanes();
      work();
      return false;
    }
    queued_[lane_].push_back(std::move(work));
    return true;
  }
  // Interleaved: each side lane's oldest pending work.
  void step_side_lanes() {
    if (schedule_ != Schedule::Interleaved) return;
    for (auto& [lane, work] : queued_)
      if (!work.empty()) {
        std::function<void()> first = std::move(work.front());
        work.erase(work.begin());
        first();
      }
  }
  void run_queued(int lane) {
    std::vector<std::function<void()>> work = std::move(queued_[lane]);
    queued_[lane].clear();
    for (auto& w : work) w();
  }
  std::map<int, std::vector<std::function<void()>>> queued_;
  std::set<int> open_;
  int lane_ = 0;
  Schedule schedule_;
};

}  // namespace lab::test
