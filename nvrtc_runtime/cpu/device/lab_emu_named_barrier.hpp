// kernels/common/lab_named_barrier.cuh on the host: the CTA's named barriers 1..15 as words private to the
// running block (layout: LAB_EMU_NBAR_* in lab_emu_abi.hpp). Arrivals are counted per thread: a warp whose
// 32 lanes all reach the call counts 32, as on the GPU, where whole warps arrive. A barrier completes when
// its arrivals reach the phase's count; then the arrivals reset and the generation advances, which releases
// its waiters. A waiter yields to the block's other threads (host_api->yield watching the word), so when
// every thread waits and no barrier can change, the launch fails as a deadlock naming each barrier's state.
//
// Errors end the launch at the call's file:line: id 0 (that is __syncthreads') or above 15, a count that is
// not a multiple of 32 or exceeds the block, and two counts for one barrier within one phase.
#pragma once

namespace lab_emu {

// The block's 16 barrier words; a previous block's are reset.
inline unsigned long long& named_barrier_word(unsigned id) {
  struct Barriers {
    unsigned long long run = ~0ull;
    unsigned long long words[16] = {};
  };
  static thread_local Barriers barriers;
  if (barriers.run != tls_self->block->run) barriers = Barriers{tls_self->block->run, {}};
  return barriers.words[id];
}

inline unsigned long long nbar_word(unsigned arrived, unsigned count, unsigned id, unsigned generation) {
  return (unsigned long long)arrived | (unsigned long long)count << 20 | (unsigned long long)id << 40 |
         (unsigned long long)(generation & 0x7fffu) << 48 | 1ull << 63;
}

// One thread's arrival; returns the generation it arrived in.
inline unsigned named_barrier_arrival(unsigned id, unsigned count, const char* file, int line) {
  const lab_emu_dim3 d = tls_self->block->block_dim;
  const unsigned threads = d.x * d.y * d.z;
  if (id < 1 || id > 15) fail("named barrier id must be 1..15 (0 is __syncthreads')", file, line);
  if (count == 0 || count % 32 != 0 || count > threads) {
    char message[128];
    std::snprintf(message, sizeof message,
                  "named barrier %u: count %u is not a multiple of 32 in 32..%u (the block's threads)", id,
                  count, threads);
    fail(message, file, line);
  }
  unsigned long long& word = named_barrier_word(id);
  const unsigned arrived = LAB_EMU_NBAR_ARRIVED(word), generation = LAB_EMU_NBAR_GENERATION(word);
  if (arrived > 0 && LAB_EMU_NBAR_COUNT(word) != count) {
    char message[128];
    std::snprintf(message, sizeof message, "named barrier %u used with counts %u and %u in one phase", id,
                  LAB_EMU_NBAR_COUNT(word), count);
    fail(message, file, line);
  }
  word = arrived + 1 == count ? nbar_word(0, count, id, generation + 1) : nbar_word(arrived + 1, count, id, generation);
  return generation;
}

}  // namespace lab_emu

inline void lab_named_barrier_arrive(unsigned id, unsigned count, const char* file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
  lab_emu::named_barrier_arrival(id, count, file, line);
}

inline void lab_named_barrier_sync(unsigned id, unsigned count, const char* file = __builtin_FILE(),
                                   int line = __builtin_LINE()) {
  const unsigned generation = lab_emu::named_barrier_arrival(id, count, file, line);
  const unsigned long long& word = lab_emu::named_barrier_word(id);
  while (LAB_EMU_NBAR_GENERATION(word) == (generation & 0x7fffu)) {
    lab_emu_thread* self = lab_emu::tls_self;
    lab_emu::host_api->yield(self, &word, word, file, line);
    lab_emu::tls_self = self;
  }
}
