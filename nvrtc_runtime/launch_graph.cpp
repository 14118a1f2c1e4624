// The default LaunchGraph: keeps the recorded work and runs it again on each replay (the cpu backend, where
// every launch runs to completion anyway).
#include "nvrtc_runtime/backend.hpp"

namespace lab {
namespace {

class ReplayedFunction : public LaunchGraph {
 public:
  explicit ReplayedFunction(std::function<void()> work) : work_(std::move(work)) {}
  void replay() override { work_(); }

 private:
  std::function<void()> work_;
};

}  // namespace

std::unique_ptr<LaunchGraph> Backend::capture(const std::function<void()>& work) {
  return std::make_unique<ReplayedFunction>(work);
}

}  // namespace lab
