// Worker threads of the cpu backend: block distribution, per-worker shared memory, fault recovery, the
// no-progress watchdog.
#include "nvrtc_runtime/cpu/worker_pool.hpp"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvrtc_runtime/cpu/block_scheduler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/cpu/fault_trap.hpp"

namespace lab::cpu {

namespace {

std::string dim_text(const lab_emu_dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

lab_emu_dim3 block_index(uint64_t linear, const lab_emu_dim3& grid) {
  return {unsigned(linear % grid.x), unsigned(linear / grid.x % grid.y),
          unsigned(linear / (uint64_t(grid.x) * grid.y))};
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

struct WorkerPool::Worker {
  std::thread thread;
  BlockScheduler scheduler;
  std::unique_ptr<unsigned char, FreeDeleter> shared;  // dynamic shared memory, 64-byte aligned
  size_t shared_bytes = 0;
  FaultCatcher catcher;
  std::atomic<uint64_t> current_block{0};  // read by the watchdog
  clockid_t cpu_clock{};                   // this thread's CPU-time clock
  // The watchdog's view: the scheduler's progress count when it last changed, and the CPU time then.
  uint64_t seen_progress = 0;
  double cpu_at_progress = 0;

  void* dynamic_shared(size_t bytes) {
    if (bytes > shared_bytes) {
      // 1024-byte aligned like the GPU's shared window: a host address then has the alignment of its shared
      // offset, which the TMA model checks and the wgmma model's swizzle reads (patterns of up to 1024 bytes).
      const size_t rounded = (bytes + 1023) / 1024 * 1024;
      shared.reset(static_cast<unsigned char*>(std::aligned_alloc(1024, rounded)));
      if (!shared)
        throw RuntimeError("cpu backend: cannot allocate " + std::to_string(bytes) +
                           " bytes of shared memory");
      shared_bytes = rounded;
    }
    return shared.get();
  }
};

WorkerPool::WorkerPool(unsigned threads, double timeout_seconds, DescribeFault describe_fault)
    : timeout_seconds_(timeout_seconds), describe_fault_(std::move(describe_fault)) {
  for (unsigned i = 0; i < (threads ? threads : 1); ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) {
    w->thread = std::thread([this, worker = w.get()] { worker_main(*worker); });
    ::pthread_getcpuclockid(w->thread.native_handle(), &w->cpu_clock);
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w->thread.join();
}

std::string WorkerPool::run(const GridJob& job) {
  install_fault_handler();
  std::unique_lock lock(mutex_);
  job_ = job;
  block_count_ = uint64_t(job.grid.x) * job.grid.y * job.grid.z;
  next_block_ = 0;
  failed_ = false;
  failure_.clear();
  busy_ = unsigned(workers_.size());
  ++generation_;
  wake_.notify_all();
  if (timeout_seconds_ > 0)
    watch(lock);
  else
    done_.wait(lock, [this] { return busy_ == 0; });
  return failure_;
}

void WorkerPool::watch(std::unique_lock<std::mutex>& lock) {
  for (auto& w : workers_) {
    w->seen_progress = w->scheduler.progress();
    w->cpu_at_progress = cpu_seconds(w->cpu_clock);
  }
  const auto poll = std::chrono::duration<double>(std::min(0.1, timeout_seconds_ / 4));
  while (!done_.wait_for(lock, poll, [this] { return busy_ == 0; })) {
    std::vector<Worker*> stuck;
    for (auto& w : workers_) {
      const uint64_t progress = w->scheduler.progress();
      const double cpu = cpu_seconds(w->cpu_clock);
      if (progress != w->seen_progress) {
        w->seen_progress = progress;
        w->cpu_at_progress = cpu;
      } else if (cpu - w->cpu_at_progress >= timeout_seconds_) {
        stuck.push_back(w.get());
      }
    }
    if (!stuck.empty()) {
      stop_stuck(stuck);
      done_.wait(lock, [this] { return busy_ == 0; });
      return;
    }
  }
}

void WorkerPool::stop_stuck(const std::vector<Worker*>& stuck) {
  // Called with mutex_ held: the failure is recorded first, so no worker reports anything else.
  failed_ = true;
  auto where = [this](const Worker& w) {
    return "block " + dim_text(block_index(w.current_block, job_.grid)) + " thread " +
           dim_text(w.scheduler.running_thread());
  };
  failure_ = where(*stuck.front()) + " made no progress in " + seconds_text(timeout_seconds_) +
             " s of CPU time (--timeout): no thread of its block exited or passed a __syncthreads, as in an "
             "infinite loop or a spin-wait on a value that a thread not yet run would set (the cpu backend runs "
             "a block's warps one at a time between barriers)";
  for (size_t i = 1; i < stuck.size(); ++i) failure_ += (i == 1 ? "; also stuck: " : ", ") + where(*stuck[i]);
  for (Worker* w : stuck) ::pthread_kill(w->thread.native_handle(), kStopSignal);
}

void WorkerPool::worker_main(Worker& worker) {
  AlternateSignalStack alt_stack;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_blocks(worker);
    std::lock_guard lock(mutex_);
    if (--busy_ == 0) done_.notify_one();
  }
}

void WorkerPool::run_blocks(Worker& worker) {
  void* shared = nullptr;
  try {
    shared = worker.dynamic_shared(job_.dynamic_shared_bytes);
  } catch (const std::exception& e) {
    record_failure(0, e.what());
    return;
  }
  run_blocks_armed(worker, shared);
}

void WorkerPool::run_blocks_armed(Worker& worker, void* shared) {
  if (sigsetjmp(worker.catcher.resume_point, 1) != 0) {
    // A fault in a kernel fiber, or the watchdog stopped it: the block is abandoned (its fibers are never
    // resumed; their stacks are reused). The watchdog has already recorded why.
    if (worker.catcher.signal != kStopSignal) report_fault(worker);
    return;
  }
  arm_fault_catcher(worker.catcher);
  run_block_loop(worker, shared);
  disarm_fault_catcher();
}

void WorkerPool::run_block_loop(Worker& worker, void* shared) {
  static std::atomic<unsigned long long> block_runs{0};
  lab_emu_block block{{0, 0, 0}, job_.block, job_.grid, shared, job_.dynamic_shared_bytes, 0};
  while (!failed_.load(std::memory_order_relaxed)) {
    const uint64_t b = next_block_.fetch_add(1, std::memory_order_relaxed);
    if (b >= block_count_) break;
    worker.current_block = b;
    block.block_idx = block_index(b, job_.grid);
    block.run = block_runs.fetch_add(1, std::memory_order_relaxed);
    std::string error = worker.scheduler.run(*job_.kernel, job_.args, block);
    if (!error.empty()) record_failure(b, error);
  }
}

void WorkerPool::report_fault(Worker& worker) {
  const void* address = worker.catcher.address;
  std::string what;
  if (!worker.catcher.address_known)
    what = "invalid memory access: an address outside the process's address space (the processor does not "
           "report it: a wild pointer or a huge index)";
  else if (worker.scheduler.stacks().in_guard_page(address))
    what = "stack overflow (fiber stacks are " + std::to_string(FiberStacks::kStackBytes / 1024) +
           " KiB; large local arrays belong in shared or global memory)";
  else
    what = describe_fault_(address, job_);
  record_failure(worker.current_block, "thread " + dim_text(worker.scheduler.running_thread()) + ": " +
                                           (worker.catcher.signal == SIGBUS ? "bus error, " : "") + what);
}

void WorkerPool::record_failure(uint64_t block, const std::string& message) {
  std::lock_guard lock(mutex_);
  if (failed_.exchange(true)) return;
  failure_ = "block " + dim_text(block_index(block, job_.grid)) + ": " + message;
}

}  // namespace lab::cpu
