// The host threads that run a grid: each worker takes block indices from a shared counter and runs each block
// wholly on itself with its own BlockScheduler (so `static thread_local` shared memory is per running block)
// and its own dynamic shared memory. The first failing block stops the launch; the workers stay alive between
// launches, so a launch costs no thread creation. A memory fault in a kernel fails the launch with its
// address in words; while a launch runs, the launching thread watches every worker and stops one that has
// used `timeout` seconds of CPU time while its block made no progress (no thread exited, no barrier released:
// an infinite loop, a spin-wait that cannot end), naming the stuck blocks and threads.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc_runtime/cpu/device/lab_emu_abi.hpp"

namespace lab::cpu {

struct GridJob {
  const lab_emu_kernel* kernel = nullptr;
  void* const* args = nullptr;
  lab_emu_dim3 grid{1, 1, 1};
  lab_emu_dim3 block{1, 1, 1};
  size_t dynamic_shared_bytes = 0;
};

class WorkerPool {
 public:
  // Words for a fault at an address during a job ("out-of-bounds access: byte 4096 of a 4096-byte buffer").
  using DescribeFault = std::function<std::string(const void* address, const GridJob& job)>;
  // `timeout_seconds`: CPU seconds a worker may run a block in which no thread exits and no barrier is
  // released (0: no limit).
  WorkerPool(unsigned threads, double timeout_seconds, DescribeFault describe_fault);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const { return unsigned(workers_.size()); }
  // Runs every block of the grid. Returns an empty string, or "block (x,y,z): what went wrong" for the first
  // block that failed.
  std::string run(const GridJob& job);

 private:
  struct Worker;
  void worker_main(Worker& worker);
  void run_blocks(Worker& worker);
  // Runs blocks with the fault catcher armed: a fault or a watchdog stop lands back here.
  void run_blocks_armed(Worker& worker, void* shared);
  void run_block_loop(Worker& worker, void* shared);
  void report_fault(Worker& worker);
  void record_failure(uint64_t block, const std::string& message);
  // Waits (holding `lock` between polls) until the launch is done, stopping workers that make no progress.
  void watch(std::unique_lock<std::mutex>& lock);
  void stop_stuck(const std::vector<Worker*>& stuck);

  std::vector<std::unique_ptr<Worker>> workers_;
  double timeout_seconds_;
  DescribeFault describe_fault_;

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  unsigned busy_ = 0;
  bool stopping_ = false;

  GridJob job_;
  uint64_t block_count_ = 0;
  std::atomic<uint64_t> next_block_{0};
  std::atomic<bool> failed_{false};
  std::string failure_;  // guarded by mutex_
};

}  // namespace lab::cpu
