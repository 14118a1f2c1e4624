// Barriers and warp collectives of the emulator. Each intrinsic name is an object-like macro that expands to
// a small function object carrying the call's __FILE__/__LINE__, so `__shfl_xor_sync(mask, v, 1)` keeps
// CUDA's spelling and default arguments while the host learns where every barrier is (divergence messages).
// Every call hands the calling fiber to the host scheduler, which resumes it once the whole block (barriers)
// or the lanes of `mask` (warp collectives) have arrived; tls_self is restored after the switch because other
// fibers of this host thread ran in between.
#pragma once

namespace lab_emu {

inline int block_sync(int op, int predicate, const char* file, int line) {
  lab_emu_thread* self = tls_self;
  const int result = host_api->block_sync(self, op, predicate, file, line);
  tls_self = self;
  return result;
}

inline unsigned long long warp_sync(int op, unsigned mask, unsigned long long value, int lane_arg, int width,
                                    const char* file, int line) {
  lab_emu_thread* self = tls_self;
  const unsigned long long result = host_api->warp_sync(self, op, mask, value, lane_arg, width, file, line);
  tls_self = self;
  return result;
}

struct SyncThreadsAt {
  const char* file;
  int line;
  void operator()() const { block_sync(LAB_EMU_SYNCTHREADS, 1, file, line); }
};

struct SyncThreadsReduceAt {
  const char* file;
  int line;
  int op;
  int operator()(int predicate) const { return block_sync(op, predicate != 0, file, line); }
};

struct SyncWarpAt {
  const char* file;
  int line;
  void operator()(unsigned mask = 0xffffffffu) const {
    warp_sync(LAB_EMU_SYNCWARP, mask, 0, 0, 32, file, line);
  }
};

// __shfl_sync / _up / _down / _xor for any trivially copyable value of at most 8 bytes (int, unsigned, float,
// double, long long, __half, __half2 ...).
struct ShuffleAt {
  const char* file;
  int line;
  int op;
  template <class T>
  T operator()(unsigned mask, T value, int lane_arg, int width = 32) const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                  "shuffles move values of at most 8 bytes");
    unsigned long long bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = warp_sync(op, mask, bits, lane_arg, width, file, line);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
  }
};

struct VoteAt {
  const char* file;
  int line;
  int op;
  unsigned operator()(unsigned mask, int predicate) const {
    return unsigned(warp_sync(op, mask, predicate != 0, 0, 32, file, line));
  }
};

inline unsigned active_mask() {
  return host_api->active_mask(tls_self);
}

}  // namespace lab_emu

#define __syncthreads        \
  ::lab_emu::SyncThreadsAt { \
    __FILE__, __LINE__       \
  }
#define __syncthreads_count                       \
  ::lab_emu::SyncThreadsReduceAt {                \
    __FILE__, __LINE__, LAB_EMU_SYNCTHREADS_COUNT \
  }
#define __syncthreads_and                       \
  ::lab_emu::SyncThreadsReduceAt {              \
    __FILE__, __LINE__, LAB_EMU_SYNCTHREADS_AND \
  }
#define __syncthreads_or                       \
  ::lab_emu::SyncThreadsReduceAt {             \
    __FILE__, __LINE__, LAB_EMU_SYNCTHREADS_OR \
  }
#define __syncwarp        \
  ::lab_emu::SyncWarpAt { \
    __FILE__, __LINE__    \
  }
#define __shfl_sync                      \
  ::lab_emu::ShuffleAt {                 \
    __FILE__, __LINE__, LAB_EMU_SHFL_IDX \
  }
#define __shfl_up_sync                  \
  ::lab_emu::ShuffleAt {                \
    __FILE__, __LINE__, LAB_EMU_SHFL_UP \
  }
#define __shfl_down_sync                  \
  ::lab_emu::ShuffleAt {                  \
    __FILE__, __LINE__, LAB_EMU_SHFL_DOWN \
  }
#define __shfl_xor_sync                  \
  ::lab_emu::ShuffleAt {                 \
    __FILE__, __LINE__, LAB_EMU_SHFL_XOR \
  }
#define __ballot_sync                  \
  ::lab_emu::VoteAt {                  \
    __FILE__, __LINE__, LAB_EMU_BALLOT \
  }
#define __any_sync(mask, pred) int(::lab_emu::VoteAt{__FILE__, __LINE__, LAB_EMU_ANY}(mask, pred))
#define __all_sync(mask, pred) int(::lab_emu::VoteAt{__FILE__, __LINE__, LAB_EMU_ALL}(mask, pred))
#define __activemask() ::lab_emu::active_mask()
