// The host threads that run a grid: each worker takes block indices from a shared counter and runs each block
// wholly on itself with its own BlockScheduler (so `static thread_local` shared memory is per running block)
// and its own dynamic shared memory. The first failing block stops the launch; the workers stay alive between
// launches, so a launch costs no thread creation.
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

#include "device/lab_emu_abi.hpp"

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
  // `trap_faults`: catch memory faults in kernels (--check-bounds); `describe_address` turns a fault address
  // into words ("4 bytes past the end of a 4096-byte buffer").
  WorkerPool(unsigned threads, bool trap_faults, std::function<std::string(const void*)> describe_address);
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
  void run_blocks_trapped(Worker& worker, void* shared);
  void run_block_loop(Worker& worker, void* shared);
  void report_fault(Worker& worker);
  void record_failure(uint64_t block, const std::string& message);

  std::vector<std::unique_ptr<Worker>> workers_;
  bool trap_faults_;
  std::function<std::string(const void*)> describe_address_;

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
