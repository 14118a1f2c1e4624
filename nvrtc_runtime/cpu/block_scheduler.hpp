// Runs one thread block of an emulated kernel on the calling host thread: every CUDA thread is a fiber
// (Boost.Context fcontext on a pooled stack) that runs until it reaches a barrier, a warp collective, or its
// end. A thread takes a stack slot when it first runs and gives it back when it ends; the slot's context then
// stays parked at the top of the fiber loop, ready to run the next thread, so a block without barriers runs
// all its threads on one hot stack with two context switches per thread and no context creation. The
// scheduler goes warp by warp: it runs the lanes of a warp until each is blocked, completes the warp
// collectives whose lanes have all arrived (lockstep exchange), repeats, then releases a block barrier once
// every thread of the block waits at the same one. Threads waiting on an mbarrier yield: each round resumes
// them once more while some watched mbarrier word has changed, and a round in which none changed while every
// thread waits is a deadlock, reported. Anything else - some threads exited or waiting at another
// barrier, a collective whose lanes never arrive - is an error reported at once, never a hang.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/context/detail/fcontext.hpp>

#include "nvrtc_runtime/cpu/device/lab_emu_abi.hpp"
#include "nvrtc_runtime/cpu/fiber_stacks.hpp"

namespace lab::cpu {

class BlockScheduler {
 public:
  static constexpr unsigned kMaxThreads = 1024;

  BlockScheduler();
  BlockScheduler(const BlockScheduler&) = delete;
  BlockScheduler& operator=(const BlockScheduler&) = delete;

  // Runs every thread of `block` to completion. Returns an empty string, or what went wrong (barrier
  // divergence, warp deadlock, a failure the kernel reported), naming threads and source lines.
  std::string run(const lab_emu_kernel& kernel, void* const* args, const lab_emu_block& block);

  // The thread whose fiber was running last (for messages about a fault or a stop that interrupted run()).
  // Safe to call from another host thread.
  lab_emu_dim3 running_thread() const;
  // Counts blocks started, threads exited and block barriers released; a watchdog on another host thread sees
  // a thread that loops forever (alone, or with its warp through warp collectives) as a count that stays put.
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }
  const FiberStacks& stacks() const { return stacks_; }

  // The services a kernel module calls (bound once per module).
  static const lab_emu_host_api& host_api();

 private:
  enum class State : uint8_t { Runnable, AtBarrier, AtWarp, Yielded, Exited, Failed };
  struct Site {
    int op;
    const char* file;
    int line;
  };
  struct Fiber {
    lab_emu_thread abi;  // first member: the module hands back &abi
    BlockScheduler* scheduler;
    boost::context::detail::fcontext_t context;  // null until the fiber first runs
    unsigned stack;                              // its slot in stacks_ while it runs or waits
    State state;
    Site site;
    unsigned mask;
    int lane_arg;
    int width;
    uint64_t value;
    uint64_t result;
    const unsigned long long* watch;  // Yielded: the mbarrier word waited on, and what it held then
    unsigned long long seen;
  };

  static Fiber& fiber_of(lab_emu_thread* self) { return *reinterpret_cast<Fiber*>(self); }
  static void fiber_main(boost::context::detail::transfer_t t);
  static int api_block_sync(lab_emu_thread* self, int op, int predicate, const char* file, int line);
  static unsigned long long api_warp_sync(lab_emu_thread* self, int op, unsigned mask,
                                          unsigned long long value, int lane_arg, int width, const char* file,
                                          int line);
  static unsigned api_active_mask(lab_emu_thread* self);
  static void api_fail(lab_emu_thread* self, const char* message, const char* file, int line);
  static void api_yield(lab_emu_thread* self, const unsigned long long* watch, unsigned long long seen,
                        const char* file, int line);

  void resume(Fiber& f);
  void count_progress() {
    progress_.store(progress_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void yield_to_scheduler();
  unsigned live_lanes(unsigned warp) const;
  // Completes every collective of `warp` whose lanes have all arrived; true when some lanes can run again.
  bool complete_warp_collectives(unsigned warp);
  void complete_collective(unsigned warp, unsigned participants);
  // With no thread runnable: releases the block barrier, or sets error_ and returns false.
  bool release_block_barrier();
  // With no thread runnable and some yielded: makes them runnable again, or sets error_ (a deadlock) and
  // returns false after a second round in a row in which no mbarrier word they watch changed.
  bool wake_yielded();
  std::string describe_block() const;
  std::string describe_threads(const std::vector<unsigned>& linear) const;
  std::string describe_waiting(const Fiber& f) const;
  std::string describe_warp_deadlock(unsigned warp, const Fiber& waiting) const;

  FiberStacks stacks_;
  std::vector<unsigned> free_stacks_;  // slots not held by a started, unfinished thread
  std::vector<boost::context::detail::fcontext_t>
      parked_;                      // per slot: a context parked at the loop top, or null
  bool block_in_progress_ = false;  // still set on entry: the last block was abandoned
  std::vector<Fiber> fibers_;
  unsigned thread_count_ = 0;
  unsigned exited_ = 0;
  unsigned stalled_rounds_ = 0;  // rounds in a row whose waiters all saw their mbarrier unchanged
  std::atomic<unsigned> running_{0};
  std::atomic<uint64_t> progress_{0};
  const lab_emu_kernel* kernel_ = nullptr;
  void* const* args_ = nullptr;
  const lab_emu_block* block_ = nullptr;
  boost::context::detail::fcontext_t scheduler_context_ = nullptr;
  std::string error_;
};

}  // namespace lab::cpu
