// The states of the GPU codec (an nvJPEG state with its stream and buffers) shared by concurrent callers: a
// call takes an idle state, or a new one when none is idle, and gives it back when done, so there are as many
// states as calls ever ran at once (one per host worker at most) and a call never waits for another's stream.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

namespace lab {

template <class State>
class NvjpegStatePool {
 public:
  // An idle state, else make().
  template <class Make>
  std::unique_ptr<State> take(Make&& make) {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<State> state = std::move(idle_.back());
        idle_.pop_back();
        return state;
      }
    }
    return make();
  }
  void give_back(std::unique_ptr<State> state) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(state));
  }
  // Destroys the idle states (before the nvJPEG handle they were made from).
  void clear() {
    std::lock_guard lock(mutex_);
    idle_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<State>> idle_;
};

}  // namespace lab
