// The C interface between the cpu backend (the host: fiber scheduler, thread pool) and a kernel module (the
// shared object the host compiler builds from a kernel .cu plus lab_emulator.hpp). The module needs nothing
// but the standard library and the CUDA headers: every scheduling service reaches it through
// lab_emu_host_api.
//
// A module exports (extern "C"):
//   int lab_emu_module_abi(void);                     -> LAB_EMU_ABI_VERSION
//   void lab_emu_bind(const lab_emu_host_api* api);   called once after dlopen, before any launch
//   const lab_emu_kernel* lab_emu_kernel_<i>(void);   one per name expression of the compile request
#pragma once

#define LAB_EMU_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lab_emu_dim3 {
  unsigned x, y, z;
} lab_emu_dim3;

// One running block; shared by its threads, owned by the host.
typedef struct lab_emu_block {
  lab_emu_dim3 block_idx;
  lab_emu_dim3 block_dim;
  lab_emu_dim3 grid_dim;
  void* dynamic_shared;
  unsigned long long dynamic_shared_bytes;
  // Different for every block run in the process (every block of every launch): state a module keeps per
  // thread of a block (the wgmma model's pending products) is recognised as a previous block's by it.
  unsigned long long run;
} lab_emu_block;

// One CUDA thread (a fiber on the host); owned by the host.
typedef struct lab_emu_thread {
  lab_emu_dim3 thread_idx;
  unsigned linear_idx;  // x + y * block_dim.x + z * block_dim.x * block_dim.y
  const lab_emu_block* block;
} lab_emu_thread;

enum lab_emu_block_op {
  LAB_EMU_SYNCTHREADS = 0,
  LAB_EMU_SYNCTHREADS_COUNT,
  LAB_EMU_SYNCTHREADS_AND,
  LAB_EMU_SYNCTHREADS_OR
};

enum lab_emu_warp_op {
  LAB_EMU_SYNCWARP = 0,
  LAB_EMU_SHFL_IDX,
  LAB_EMU_SHFL_UP,
  LAB_EMU_SHFL_DOWN,
  LAB_EMU_SHFL_XOR,
  LAB_EMU_BALLOT,
  LAB_EMU_ANY,
  LAB_EMU_ALL
};

// Services of the host. Every call that can switch fibers takes the calling thread; `file`/`line` locate the
// call in the kernel source for error messages.
typedef struct lab_emu_host_api {
  int abi_version;
  // Block barrier; returns the count / and / or of `predicate` over the block (0 for a plain __syncthreads).
  int (*block_sync)(lab_emu_thread* self, int op, int predicate, const char* file, int line);
  // Warp collective over the lanes of `mask`; `value` is the caller's bits (shuffles) or predicate (votes),
  // `lane_arg` the source lane / delta / xor mask, `width` the shuffle segment. Returns the result bits.
  unsigned long long (*warp_sync)(lab_emu_thread* self, int op, unsigned mask, unsigned long long value,
                                  int lane_arg, int width, const char* file, int line);
  // Lanes of the caller's warp that have not exited.
  unsigned (*active_mask)(lab_emu_thread* self);
  // Stops the whole launch with `message`; never returns to the caller.
  void (*fail)(lab_emu_thread* self, const char* message, const char* file, int line);
  // Lets the block's other threads run while the caller waits on an mbarrier: `watch` is the barrier's word,
  // which held `seen` when the caller's wait failed. The caller resumes after every other runnable thread of
  // the block has run; when all the block's threads wait (here, at a barrier or at a warp collective) and no
  // watched word changed since its waiter looked, the launch fails naming what each thread waits for.
  void (*yield)(lab_emu_thread* self, const unsigned long long* watch, unsigned long long seen,
                const char* file, int line);
} lab_emu_host_api;

// The emulator's mbarrier word (lab_emu_mbarrier.hpp), here so the host can say what a waiter waits for:
// bits 0-19 pending arrivals of the current phase, 20-39 expected arrivals per phase, 40-60 the transaction
// count (bytes, 21-bit two's complement), 61 the current phase's parity, 62 set while initialised.
#define LAB_EMU_MBAR_PENDING(w) ((unsigned)((w)&0xfffffull))
#define LAB_EMU_MBAR_EXPECTED(w) ((unsigned)(((w) >> 20) & 0xfffffull))
#define LAB_EMU_MBAR_TX(w) ((int)((((w) >> 40) & 0x1fffffull) ^ 0x100000ull) - 0x100000)
#define LAB_EMU_MBAR_PHASE(w) ((unsigned)(((w) >> 61) & 1ull))
#define LAB_EMU_MBAR_VALID(w) ((unsigned)(((w) >> 62) & 1ull))

// A named barrier's word (lab_emu_named_barrier.hpp), told apart from an mbarrier's by bit 63: bits 0-19
// threads arrived in the current phase, 20-39 the phase's count, 40-47 the barrier id, 48-62 the generation
// (phases completed, modulo 2^15).
#define LAB_EMU_NBAR_TAGGED(w) ((unsigned)((w) >> 63))
#define LAB_EMU_NBAR_ARRIVED(w) ((unsigned)((w)&0xfffffull))
#define LAB_EMU_NBAR_COUNT(w) ((unsigned)(((w) >> 20) & 0xfffffull))
#define LAB_EMU_NBAR_ID(w) ((unsigned)(((w) >> 40) & 0xffull))
#define LAB_EMU_NBAR_GENERATION(w) ((unsigned)(((w) >> 48) & 0x7fffull))

typedef void (*lab_emu_run_fn)(lab_emu_thread* self, void* const* args);

// One exported kernel: its parameter list (from the instantiated function's real type) and the entry that
// unpacks `args` (pointers to each argument) and runs the kernel body as thread `self`.
typedef struct lab_emu_kernel {
  const char* name_expression;
  unsigned param_count;
  const unsigned long long* param_sizes;
  const char* const* param_types;  // type names as the compiler spells them
  lab_emu_run_fn run;
} lab_emu_kernel;

#ifdef __cplusplus
}
#endif
