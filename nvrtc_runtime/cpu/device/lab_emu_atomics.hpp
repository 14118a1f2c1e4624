// CUDA atomics on the host. Blocks run concurrently on several host threads, so every atomic is a real one
// (GCC __atomic builtins on the target; compare-and-swap loops where x86 has no instruction: float/double
// add, min/max). Relaxed ordering, as CUDA's atomics; __threadfence is a full fence.
#pragma once

namespace lab_emu {

template <class T, class Combine>
T atomic_update(T* address, Combine combine) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T desired = combine(old);
  while (!__atomic_compare_exchange(address, &old, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    desired = combine(old);
  return old;
}

}  // namespace lab_emu

#define LAB_EMU_INTEGER_ATOMICS(T)                                                              \
  inline T atomicAdd(T* a, T v) {                                                               \
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);                                          \
  }                                                                                             \
  inline T atomicSub(T* a, T v) {                                                               \
    return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED);                                          \
  }                                                                                             \
  inline T atomicAnd(T* a, T v) {                                                               \
    return __atomic_fetch_and(a, v, __ATOMIC_RELAXED);                                          \
  }                                                                                             \
  inline T atomicOr(T* a, T v) {                                                                \
    return __atomic_fetch_or(a, v, __ATOMIC_RELAXED);                                           \
  }                                                                                             \
  inline T atomicXor(T* a, T v) {                                                               \
    return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED);                                          \
  }                                                                                             \
  inline T atomicExch(T* a, T v) {                                                              \
    return __atomic_exchange_n(a, v, __ATOMIC_RELAXED);                                         \
  }                                                                                             \
  inline T atomicMax(T* a, T v) {                                                               \
    return ::lab_emu::atomic_update(a, [v](T old) { return old < v ? v : old; });               \
  }                                                                                             \
  inline T atomicMin(T* a, T v) {                                                               \
    return ::lab_emu::atomic_update(a, [v](T old) { return v < old ? v : old; });               \
  }                                                                                             \
  inline T atomicCAS(T* a, T compare, T value) {                                                \
    __atomic_compare_exchange_n(a, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return compare;                                                                             \
  }

LAB_EMU_INTEGER_ATOMICS(int)
LAB_EMU_INTEGER_ATOMICS(unsigned int)
LAB_EMU_INTEGER_ATOMICS(long long)
LAB_EMU_INTEGER_ATOMICS(unsigned long long)
#undef LAB_EMU_INTEGER_ATOMICS

inline float atomicAdd(float* a, float v) {
  return ::lab_emu::atomic_update(a, [v](float old) { return old + v; });
}
inline double atomicAdd(double* a, double v) {
  return ::lab_emu::atomic_update(a, [v](double old) { return old + v; });
}
inline float atomicExch(float* a, float v) {
  float old;
  __atomic_exchange(a, &v, &old, __ATOMIC_RELAXED);
  return old;
}
// Wrapping increment / decrement as CUDA defines them.
inline unsigned atomicInc(unsigned* a, unsigned limit) {
  return ::lab_emu::atomic_update(a, [limit](unsigned old) { return old >= limit ? 0u : old + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned limit) {
  return ::lab_emu::atomic_update(
      a, [limit](unsigned old) { return (old == 0 || old > limit) ? limit : old - 1; });
}

inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_system() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
