// Worker threads of the cpu backend: block distribution, per-worker shared memory, fault recovery.
#include "worker_pool.hpp"

#include <csignal>
#include <cstdlib>
#include <cstring>

#include "block_scheduler.hpp"
#include "errors.hpp"
#include "fault_trap.hpp"

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

}  // namespace

struct WorkerPool::Worker {
  std::thread thread;
  BlockScheduler scheduler;
  std::unique_ptr<unsigned char, FreeDeleter> shared;  // dynamic shared memory, 64-byte aligned
  size_t shared_bytes = 0;
  FaultCatcher catcher;
  uint64_t current_block = 0;

  void* dynamic_shared(size_t bytes) {
    if (bytes > shared_bytes) {
      const size_t rounded = (bytes + 63) / 64 * 64;
      shared.reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
      if (!shared)
        throw RuntimeError("cpu backend: cannot allocate " + std::to_string(bytes) +
                           " bytes of shared memory");
      shared_bytes = rounded;
    }
    return shared.get();
  }
};

WorkerPool::WorkerPool(unsigned threads, bool trap_faults,
                       std::function<std::string(const void*)> describe_address)
    : trap_faults_(trap_faults), describe_address_(std::move(describe_address)) {
  for (unsigned i = 0; i < (threads ? threads : 1); ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) w->thread = std::thread([this, worker = w.get()] { worker_main(*worker); });
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
  if (trap_faults_) install_fault_handler();
  std::unique_lock lock(mutex_);
  job_ = job;
  block_count_ = uint64_t(job.grid.x) * job.grid.y * job.grid.z;
  next_block_ = 0;
  failed_ = false;
  failure_.clear();
  busy_ = unsigned(workers_.size());
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [this] { return busy_ == 0; });
  return failure_;
}

void WorkerPool::worker_main(Worker& worker) {
  std::unique_ptr<AlternateSignalStack> alt_stack;
  if (trap_faults_) alt_stack = std::make_unique<AlternateSignalStack>();
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
  if (trap_faults_)
    run_blocks_trapped(worker, shared);
  else
    run_block_loop(worker, shared);
}

void WorkerPool::run_blocks_trapped(Worker& worker, void* shared) {
  if (sigsetjmp(worker.catcher.resume_point, 1) != 0) {
    // A fault in a kernel fiber: the block is abandoned (its fibers are never resumed; their stacks are
    // reused).
    report_fault(worker);
    return;
  }
  arm_fault_catcher(worker.catcher);
  run_block_loop(worker, shared);
  disarm_fault_catcher();
}

void WorkerPool::run_block_loop(Worker& worker, void* shared) {
  lab_emu_block block{{0, 0, 0}, job_.block, job_.grid, shared, job_.dynamic_shared_bytes};
  while (!failed_.load(std::memory_order_relaxed)) {
    const uint64_t b = next_block_.fetch_add(1, std::memory_order_relaxed);
    if (b >= block_count_) break;
    worker.current_block = b;
    block.block_idx = block_index(b, job_.grid);
    std::string error = worker.scheduler.run(*job_.kernel, job_.args, block);
    if (!error.empty()) record_failure(b, error);
  }
}

void WorkerPool::report_fault(Worker& worker) {
  const void* address = worker.catcher.address;
  const std::string what = worker.scheduler.stacks().in_guard_page(address)
                               ? "stack overflow (fiber stacks are " +
                                     std::to_string(FiberStacks::kStackBytes / 1024) +
                                     " KiB; large local arrays belong in shared or global memory)"
                               : "out-of-bounds access: " + describe_address_(address);
  record_failure(worker.current_block, "thread " + dim_text(worker.scheduler.running_thread()) + ": " +
                                           (worker.catcher.signal == SIGBUS ? "bus error, " : "") + what);
}

void WorkerPool::record_failure(uint64_t block, const std::string& message) {
  std::lock_guard lock(mutex_);
  if (failed_.exchange(true)) return;
  failure_ = "block " + dim_text(block_index(block, job_.grid)) + ": " + message;
}

}  // namespace lab::cpu
