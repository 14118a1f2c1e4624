// DelayedLanesBackend: a CountingBackend that runs the launches of lanes 1.. (Backend::fork_lanes) as late as
// CUDA streams may: queued with copies of their arguments and run, in order, only when the lanes join (or the
// host synchronizes), while the main lane's work runs at once. A pass that gives the same bits through it as
// through the plain backend reads and writes nothing from the main lane that a side lane's pending launches
// still need. It also records the lanes each kernel ran on and counts forks and joins.
#pragma once
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
  using CountingBackend::CountingBackend;
  std::map<std::string, std::set<int>> lanes_of;  // by Kernel::name_expression
  size_t forks = 0, joins = 0;
  size_t pending() const { return queued_.size(); }

  void launch(const Kernel& kernel, const LaunchConfig& config, const KernelArgs& args) override {
    lanes_of[kernel.name_expression].insert(lane_);
    if (lane_ == 0) return CountingBackend::launch(kernel, config, args);
    std::vector<std::vector<char>> bytes;  // the arguments copied: the caller's go out of scope
    for (size_t i = 0; i < args.pointers.size(); ++i) {
      const char* p = static_cast<const char*>(args.pointers[i]);
      bytes.emplace_back(p, p + args.sizes[i]);
    }
    queued_.push_back([this, kernel, config, bytes = std::move(bytes), args]() mutable {
      KernelArgs copy = args;
      for (size_t i = 0; i < bytes.size(); ++i) copy.pointers[i] = bytes[i].data();
      CountingBackend::launch(kernel, config, copy);
    });
  }
  void fork_lanes(int count) override {
    ++forks;
    open_ = count - 1;
  }
  void use_lane(int lane) override {
    if (lane < 0 || lane > open_) throw RuntimeError("lane " + std::to_string(lane) + " was not forked");
    lane_ = lane;
  }
  void join_lanes() override {
    ++joins;
    run_queued();
    open_ = lane_ = 0;
  }
  void synchronize() override {
    run_queued();
    CountingBackend::synchronize();
  }

 private:
  void run_queued() {
    for (auto& work : queued_) work();
    queued_.clear();
  }
  std::vector<std::function<void()>> queued_;
  int open_ = 0, lane_ = 0;
};

}  // namespace lab::test
