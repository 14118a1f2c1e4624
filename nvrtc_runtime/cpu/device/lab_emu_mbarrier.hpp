// kernels/common/lab_mbarrier.cuh on the host: the mbarrier of the PTX ISA in its 8 bytes of shared memory
// (layout: LAB_EMU_MBAR_* in lab_emu_abi.hpp) and the fences, which order nothing on the emulator (a block's
// threads run one at a time on one host thread and TMA copies complete when issued).
//
// A phase completes when its pending arrivals and its transaction count both reach zero; then the parity
// flips, the pending arrivals are reset to the count given at init and the transaction count starts again at
// zero. expect_tx raises the transaction count, complete_tx (a TMA copy landing) lowers it; it may go
// negative while arrivals are pending (a copy landing before its expect_tx). try_wait.parity(p) is true once
// the phase of parity p has completed, that is while the current phase's parity is not p. A failed try_wait
// yields to the block's other threads (host_api->yield), so a wait loop lets producers run; when every thread
// waits and no mbarrier can change, the launch fails as a deadlock naming each waiter's mbarrier state.
//
// Errors end the launch at the call's file:line: an mbarrier not 8-byte aligned, used before init or after
// inval, an arrival with none pending, counts out of the PTX ranges, and transaction bytes that overshoot
// once every arrival is in (an expect_tx that does not match the bytes the copies bring).
#pragma once

namespace lab_emu {

constexpr unsigned long long kMbarCountMax = (1ull << 20) - 1;

inline unsigned long long mbar_word(unsigned pending, unsigned expected, long long tx, unsigned phase) {
  return (unsigned long long)pending | (unsigned long long)expected << 20 |
         ((unsigned long long)tx & 0x1fffffull) << 40 | (unsigned long long)phase << 61 | 1ull << 62;
}

// The barrier's word, checked to be aligned and initialised.
inline unsigned long long& mbar_checked(void* bar, const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(bar) % 8 != 0) fail("mbarrier address is not 8-byte aligned", file, line);
  auto& word = *static_cast<unsigned long long*>(bar);
  if (!LAB_EMU_MBAR_VALID(word)) fail("mbarrier used before lab_mbarrier_init (or after inval)", file, line);
  return word;
}

// Applies `arrivals` arrivals and `tx_delta` transaction bytes; completes the phase when both are done.
inline void mbar_update(void* bar, unsigned arrivals, long long tx_delta, const char* file, int line) {
  unsigned long long& word = mbar_checked(bar, file, line);
  const unsigned pending = LAB_EMU_MBAR_PENDING(word);
  if (arrivals > pending) {
    char message[160];
    std::snprintf(message, sizeof message,
                  "mbarrier arrive with %u arrival(s) when only %u are pending in this phase", arrivals,
                  pending);
    fail(message, file, line);
  }
  const long long tx = LAB_EMU_MBAR_TX(word) + tx_delta;
  if (tx > (long long)kMbarCountMax || tx < -(long long)kMbarCountMax)
    fail("mbarrier transaction count leaves the range of 2^20 - 1 bytes", file, line);
  const unsigned left = pending - arrivals;
  if (left == 0 && tx < 0) {
    char message[200];
    std::snprintf(
        message, sizeof message,
        "mbarrier received %lld transaction bytes more than expect_tx announced once every arrival was in "
        "(the expect_tx does not match the bytes of the copies)",
        -tx);
    fail(message, file, line);
  }
  const unsigned expected = LAB_EMU_MBAR_EXPECTED(word), phase = LAB_EMU_MBAR_PHASE(word);
  word = left == 0 && tx == 0 ? mbar_word(expected, expected, 0, phase ^ 1u)
                              : mbar_word(left, expected, tx, phase);
}

// A TMA copy of `bytes` landing on `bar` (lab_emu_tma.hpp).
inline void mbar_complete_tx(void* bar, unsigned long long bytes, const char* file, int line) {
  mbar_update(bar, 0, -(long long)bytes, file, line);
}

}  // namespace lab_emu

inline void lab_mbarrier_init(uint64_t* bar, unsigned count, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  if (reinterpret_cast<uintptr_t>(bar) % 8 != 0)
    lab_emu::fail("mbarrier address is not 8-byte aligned", file, line);
  if (count < 1 || count > lab_emu::kMbarCountMax)
    lab_emu::fail("mbarrier init count must be 1 to 2^20 - 1", file, line);
  *bar = lab_emu::mbar_word(count, count, 0, 0);
}

inline void lab_mbarrier_inval(uint64_t* bar, const char* file = __builtin_FILE(),
                               int line = __builtin_LINE()) {
  lab_emu::mbar_checked(bar, file, line) = 0;
}

inline void lab_mbarrier_arrive(uint64_t* bar, const char* file = __builtin_FILE(),
                                int line = __builtin_LINE()) {
  lab_emu::mbar_update(bar, 1, 0, file, line);
}

inline void lab_mbarrier_expect_tx(uint64_t* bar, unsigned bytes, const char* file = __builtin_FILE(),
                                   int line = __builtin_LINE()) {
  lab_emu::mbar_update(bar, 0, bytes, file, line);
}

inline void lab_mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes, const char* file = __builtin_FILE(),
                                          int line = __builtin_LINE()) {
  lab_emu::mbar_update(bar, 1, bytes, file, line);
}

inline void lab_mbarrier_complete_tx(uint64_t* bar, unsigned bytes, const char* file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
  lab_emu::mbar_complete_tx(bar, bytes, file, line);
}

inline bool lab_mbarrier_try_wait_parity(uint64_t* bar, unsigned parity, const char* file = __builtin_FILE(),
                                         int line = __builtin_LINE()) {
  const unsigned long long seen = lab_emu::mbar_checked(bar, file, line);
  if (LAB_EMU_MBAR_PHASE(seen) != (parity & 1u)) return true;
  lab_emu_thread* self = lab_emu::tls_self;
  lab_emu::host_api->yield(self, reinterpret_cast<const unsigned long long*>(bar), seen, file, line);
  lab_emu::tls_self = self;
  return LAB_EMU_MBAR_PHASE(lab_emu::mbar_checked(bar, file, line)) != (parity & 1u);
}

inline void lab_mbarrier_wait_parity(uint64_t* bar, unsigned parity, const char* file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
  while (!lab_mbarrier_try_wait_parity(bar, parity, file, line)) {
  }
}

inline void lab_fence_mbarrier_init() {}
