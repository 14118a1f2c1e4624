// Stopping emulated kernels from outside their fibers: memory faults and the no-progress watchdog. A
// process-wide SIGSEGV/SIGBUS handler runs on each worker's alternate signal stack; when the faulting host
// thread is armed (it is running kernel fibers) the handler records the address and siglongjmp()s out of the
// fiber back to the worker, which abandons the block and reports the launch as failed. A fault on an unarmed
// thread goes to the previous handler (by default: the process dies, as it would have without the trap). The
// watchdog stops a worker whose fiber makes no progress by sending it kStopSignal, which takes the same jump
// (and is ignored by a thread that is no longer armed).
#pragma once
#include <csetjmp>
#include <csignal>
#include <cstddef>
#include <vector>

namespace lab::cpu {

// Sent by the watchdog to a worker whose kernel fiber runs without progress.
inline constexpr int kStopSignal = SIGUSR2;

struct FaultCatcher {
  sigjmp_buf resume_point;  // set with sigsetjmp(resume_point, 1) by the worker before arming
  void* address = nullptr;  // filled by the handler
  bool address_known = true;  // false for a general-protection fault (a non-canonical address): no address
  int signal = 0;            // SIGSEGV, SIGBUS or kStopSignal
};

// Makes the handler the current one for SIGSEGV, SIGBUS and kStopSignal, keeping whatever was installed
// before for the faults as the fallback. Called before every launch: other code (test frameworks, crash reporters) may have
// replaced it since. Thread safe.
void install_fault_handler();

// Between arm() and disarm(), a fault on this thread jumps to `catcher.resume_point` (and disarms). Plain
// calls, not a scope object: siglongjmp must not skip destructors, so the frames between sigsetjmp and the
// kernel hold only trivially destructible objects.
void arm_fault_catcher(FaultCatcher& catcher);
void disarm_fault_catcher();

// The calling thread's alternate signal stack (the handler must not run on a fiber's small stack).
class AlternateSignalStack {
 public:
  AlternateSignalStack();
  ~AlternateSignalStack();
  AlternateSignalStack(const AlternateSignalStack&) = delete;
  AlternateSignalStack& operator=(const AlternateSignalStack&) = delete;

 private:
  std::vector<char> memory_;
};

}  // namespace lab::cpu
