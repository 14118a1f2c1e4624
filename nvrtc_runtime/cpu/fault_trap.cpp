// SIGSEGV/SIGBUS and watchdog-stop handling: jump out of the faulting or stuck fiber to the armed worker.
#include "nvrtc_runtime/cpu/fault_trap.hpp"

#include <signal.h>

#include <cstring>
#include <mutex>

namespace lab::cpu {

namespace {

thread_local FaultCatcher* tls_armed = nullptr;
struct sigaction previous_segv, previous_bus;

void on_fault(int sig, siginfo_t* info, void*) {
  if (FaultCatcher* catcher = tls_armed) {
    tls_armed = nullptr;
    catcher->address = info->si_addr;
    catcher->address_known = info->si_code != SI_KERNEL;
    catcher->signal = sig;
    siglongjmp(catcher->resume_point, 1);
  }
  if (sig == kStopSignal) return;  // the worker finished on its own before the watchdog's signal arrived
  // Not an emulated kernel: restore the previous disposition; the faulting instruction runs again and meets
  // it.
  sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, nullptr);
}

}  // namespace

void install_fault_handler() {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  for (int sig : {SIGSEGV, SIGBUS, kStopSignal}) {
    struct sigaction current;
    sigaction(sig, nullptr, &current);
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == &on_fault) continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, sig == SIGSEGV ? &previous_segv : sig == SIGBUS ? &previous_bus : nullptr);
  }
}

void arm_fault_catcher(FaultCatcher& catcher) {
  tls_armed = &catcher;
}
void disarm_fault_catcher() {
  tls_armed = nullptr;
}

AlternateSignalStack::AlternateSignalStack() : memory_(size_t(SIGSTKSZ) < 65536 ? 65536 : size_t(SIGSTKSZ)) {
  stack_t ss;
  ss.ss_sp = memory_.data();
  ss.ss_size = memory_.size();
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
}

AlternateSignalStack::~AlternateSignalStack() {
  stack_t ss;
  std::memset(&ss, 0, sizeof ss);
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, nullptr);
}

}  // namespace lab::cpu
