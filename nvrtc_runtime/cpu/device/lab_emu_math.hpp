// CUDA math intrinsics and integer helpers on the host. The standard float functions (expf, exp2f, logf,
// log1pf, sqrtf, fmaf, atan2f, tanhf, fminf, fmaxf, copysignf ...) come from <cmath>; the fast-math
// intrinsics
// (__expf, __logf, __fdividef ...) are computed with the accurate host functions, so they agree with the GPU
// to within the intrinsic's documented error, not bit for bit.
#pragma once

inline float __expf(float x) {
  return expf(x);
}
inline float __exp10f(float x) {
  return powf(10.0f, x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __log2f(float x) {
  return log2f(x);
}
inline float __log10f(float x) {
  return log10f(x);
}
inline float __powf(float x, float y) {
  return powf(x, y);
}
inline float __sinf(float x) {
  return sinf(x);
}
inline float __cosf(float x) {
  return cosf(x);
}
inline float __tanf(float x) {
  return tanf(x);
}
inline void __sincosf(float x, float* s, float* c) {
  *s = sinf(x), *c = cosf(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float fdividef(float a, float b) {
  return a / b;
}
inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}
inline float rcbrtf(float x) {
  return 1.0f / cbrtf(x);
}
inline float __saturatef(float x) {
  return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f);
}  // NaN -> 0

inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fdiv_rn(float a, float b) {
  return a / b;
}
inline float __fmaf_rn(float a, float b, float c) {
  return fmaf(a, b, c);
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return sqrtf(x);
}
inline float __frsqrt_rn(float x) {
  return 1.0f / sqrtf(x);
}
inline double __dadd_rn(double a, double b) {
  return a + b;
}
inline double __dmul_rn(double a, double b) {
  return a * b;
}
inline double __fma_rn(double a, double b, double c) {
  return fma(a, b, c);
}

template <class To, class From>
inline To lab_emu_bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit casts keep the size");
  To out;
  std::memcpy(&out, &v, sizeof(To));
  return out;
}
inline int __float_as_int(float x) {
  return lab_emu_bit_cast<int>(x);
}
inline unsigned __float_as_uint(float x) {
  return lab_emu_bit_cast<unsigned>(x);
}
inline float __int_as_float(int x) {
  return lab_emu_bit_cast<float>(x);
}
inline float __uint_as_float(unsigned x) {
  return lab_emu_bit_cast<float>(x);
}
inline long long __double_as_longlong(double x) {
  return lab_emu_bit_cast<long long>(x);
}
inline double __longlong_as_double(long long x) {
  return lab_emu_bit_cast<double>(x);
}

inline int __float2int_rn(float x) {
  return int(nearbyintf(x));
}
inline int __float2int_rz(float x) {
  return int(truncf(x));
}
inline int __float2int_rd(float x) {
  return int(floorf(x));
}
inline int __float2int_ru(float x) {
  return int(ceilf(x));
}
inline unsigned __float2uint_rn(float x) {
  return unsigned(nearbyintf(x));
}
inline float __int2float_rn(int x) {
  return float(x);
}
inline float __uint2float_rn(unsigned x) {
  return float(x);
}

inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(unsigned(x));
}
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll((unsigned long long)x);
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
// prmt's default mode: result byte n is byte (s >> 4 n) & 7 of the 8 bytes y:x (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned(bytes >> (8 * ((s >> (4 * n)) & 7)) & 0xffu) << (8 * n);
  return r;
}
inline int __mul24(int a, int b) {
  return a * b;
}
inline unsigned __umul24(unsigned a, unsigned b) {
  return a * b;
}
inline int __mulhi(int a, int b) {
  return int((long long)a * b >> 32);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return unsigned((unsigned long long)a * b >> 32);
}

// Read-only cache loads are plain loads on the host.
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
// L2-only (cache-global) loads are plain loads on the host too.
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}

// CUDA's min/max overload set for the device (integers of both signs, float, double).
#define LAB_EMU_MIN_MAX(R, A, B)                                                          \
  inline R min(A a, B b) {                                                                \
    return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }                                                                                       \
  inline R max(A a, B b) {                                                                \
    return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }
LAB_EMU_MIN_MAX(int, int, int)
LAB_EMU_MIN_MAX(unsigned, unsigned, unsigned)
LAB_EMU_MIN_MAX(unsigned, int, unsigned)
LAB_EMU_MIN_MAX(unsigned, unsigned, int)
LAB_EMU_MIN_MAX(long, long, long)
LAB_EMU_MIN_MAX(unsigned long, unsigned long, unsigned long)
LAB_EMU_MIN_MAX(long long, long long, long long)
LAB_EMU_MIN_MAX(unsigned long long, unsigned long long, unsigned long long)
#undef LAB_EMU_MIN_MAX
inline float min(float a, float b) {
  return fminf(a, b);
}
inline float max(float a, float b) {
  return fmaxf(a, b);
}
inline double min(double a, double b) {
  return fmin(a, b);
}
inline double max(double a, double b) {
  return fmax(a, b);
}
inline double min(float a, double b) {
  return fmin(a, b);
}
inline double max(float a, double b) {
  return fmax(a, b);
}
inline double min(double a, float b) {
  return fmin(a, b);
}
inline double max(double a, float b) {
  return fmax(a, b);
}
