// kernels/common/lab_mma.cuh on the host: lab_pack2, lab_to_float, lab_mma_16816, lab_to_tf32,
// lab_mma_1688_tf32, lab_ldmatrix_x4 / _x2
// (plain and .trans) and lab_cp_async_16 / _commit / _wait with the PTX per-lane register layouts documented
// in lab_mma.cuh, so a kernel written against those layouts runs unchanged on the emulator.
//
// mma and ldmatrix are warp collectives: every lane holds a different part of the operands, so each lane
// publishes its registers (or its row address) in an exchange area of its warp (static thread_local, like
// __shared__: a block runs wholly on one host thread), waits for the warp like __syncwarp carrying the
// call's file and line, computes its own registers from all 32 lanes' parts, and waits once more so no lane
// overwrites the area before every lane has read it. All 32 lanes of a full warp must make the same call:
// lanes that have exited or wait at another __syncwarp or lab_* collective end the launch with an error at
// the call's line, lanes waiting at a barrier are reported as a collective that never completes.
//
// Numerics: conversions to fp16 / bfloat16 round to nearest even (NaN, infinities, overflow to infinity and
// subnormals as cvt.rn does). A product of two fp16 or bfloat16 values is exact in float (barring bfloat16
// products beyond float's range); mma sums the 16 products of each output in float in k order and adds the
// sum onto the accumulator. The tensor cores accumulate in another order, so results may differ from the
// GPU's in the last bits. tf32: lab_to_tf32 rounds the 13 low mantissa bits away to nearest, ties away from
// zero (cvt.rna); the tf32 mma reads only the upper 19 bits of each operand (the low 13 are dropped, as the
// tensor cores do), so each product is exact in float and the 8 of an output are summed like the 16 above.
// cp.async copies (or zero-fills) at once; commit and wait have nothing to wait for.
#pragma once

// lab_mma.cuh defines both again, identically (C++ allows that; a mismatch would be diagnosed).
#define LAB_F16 0
#define LAB_BF16 1

namespace lab_emu {

template <int DT>
inline uint16_t round16(float v) {
  static_assert(DT == LAB_F16 || DT == LAB_BF16, "the element type is LAB_F16 or LAB_BF16");
  if constexpr (DT == LAB_F16)
    return __half_as_ushort(__float2half_rn(v));
  else
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

}  // namespace lab_emu

// Rounds two floats to nearest even and packs them: `lo` in bits 0-15.
template <int DT>
inline uint32_t lab_pack2(float lo, float hi) {
  return uint32_t(lab_emu::round16<DT>(lo)) | uint32_t(lab_emu::round16<DT>(hi)) << 16;
}

// One 16-bit pattern to float (exact).
template <int DT>
inline float lab_to_float(uint16_t bits) {
  static_assert(DT == LAB_F16 || DT == LAB_BF16, "the element type is LAB_F16 or LAB_BF16");
  if constexpr (DT == LAB_F16) {
    return __half2float(__ushort_as_half(bits));
  } else {
    const uint32_t wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
  }
}

// 16 bytes to `dst` now, or 16 zero bytes when `valid` is false (then `src` is not read).
inline void lab_cp_async_16(void* dst, const void* src, bool valid) {
  if (valid)
    std::memcpy(dst, src, 16);
  else
    std::memset(dst, 0, 16);
}
inline void lab_cp_async_commit() {}
template <int PENDING>
inline void lab_cp_async_wait() {}

// x rounded to tf32 (cvt.rna.tf32.f32): to nearest on the 13 low mantissa bits, ties away from zero (adding
// half a tf32 ulp to the magnitude carries into the exponent where it should); NaN and infinity unchanged.
inline uint32_t lab_to_tf32(float x) {
  const uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;
  return (bits + 0x1000u) & ~0x1fffu;
}

// 2^x with results below the smallest normal float flushed to zero (ex2.approx.ftz.f32).
inline float lab_exp2_ftz(float x) {
  const float r = exp2f(x);
  return r < FLT_MIN ? 0.0f : r;
}

namespace lab_emu {

// One lane's part of a warp collective.
struct MmaLane {
  uint32_t a[4], b[2];
  const void* row;   // ldmatrix row address
  const char* file;  // the call this lane is in; null outside a call
  int line;
};

// Publishes, exchanges and releases the parts of the 32 lanes of the calling warp.
class WarpExchange {
 public:
  WarpExchange(const char* what, const char* file, int line)
      : what_(what), file_(file), line_(line), lane_(tls_self->linear_idx % 32) {
    static thread_local MmaLane area[32][32];  // [warp of the block][lane]
    lanes_ = area[tls_self->linear_idx / 32];
  }
  MmaLane& mine() { return lanes_[lane_]; }
  unsigned lane() const { return lane_; }

  // Once mine() is filled in: waits for the warp, then checks that all 32 lanes are in this call.
  const MmaLane* exchange() {
    lanes_[lane_].file = file_;
    lanes_[lane_].line = line_;
    warp_sync(LAB_EMU_SYNCWARP, 0xffffffffu, 0, 0, 32, file_, line_);
    unsigned missing = ~active_mask();
    for (unsigned i = 0; i < 32; ++i)
      if (lanes_[i].file != file_ || lanes_[i].line != line_) missing |= 1u << i;
    if (missing != 0) {
      char message[160];
      std::snprintf(
          message, sizeof message,
          "%s is a warp collective of all 32 lanes, but lanes 0x%08x of the warp are not in this call", what_,
          missing);
      fail(message, file_, line_);
    }
    return lanes_;
  }
  // Once this lane has read the others' parts: waits until every lane has, then leaves the area.
  void release() {
    warp_sync(LAB_EMU_SYNCWARP, 0xffffffffu, 0, 0, 32, file_, line_);
    lanes_[lane_].file = nullptr;
  }

 private:
  const char* what_;
  const char* file_;
  int line_;
  unsigned lane_;
  MmaLane* lanes_;
};

inline uint16_t half_of(uint32_t pair, unsigned index) {
  return uint16_t(index & 1u ? pair >> 16 : pair & 0xffffu);
}

inline uint16_t row_element(const void* row, unsigned column) {
  uint16_t v;
  std::memcpy(&v, static_cast<const char*>(row) + 2 * column, sizeof v);
  return v;
}

// The function objects behind the lab_mma_16816 / lab_ldmatrix_* macros below: each carries its call site.
struct MmaAt {
  const char* file;
  int line;
  // d += a * b (layouts in lab_mma.cuh).
  template <int DT>
  void call(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) const {
    WarpExchange x("lab_mma_16816", file, line);
    std::memcpy(x.mine().a, a, sizeof a);
    std::memcpy(x.mine().b, b, sizeof b);
    const MmaLane* lanes = x.exchange();
    const unsigned g = x.lane() / 4, t = x.lane() % 4;
    // A[r][k] sits in lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 * (k >= 8); B[k][n] in lane
    // n * 4 + (k % 8) / 2, register k >= 8; the element with the even index in the low half.
    float a_rows[2][16], b_cols[2][16];
    for (unsigned k = 0; k < 16; ++k) {
      const unsigned source = (k % 8) / 2;
      for (unsigned h = 0; h < 2; ++h) {
        a_rows[h][k] = lab_to_float<DT>(half_of(lanes[g * 4 + source].a[h + 2 * (k >= 8)], k));
        b_cols[h][k] = lab_to_float<DT>(half_of(lanes[(2 * t + h) * 4 + source].b[k >= 8], k));
      }
    }
    x.release();
    for (unsigned i = 0; i < 4; ++i) {
      float sum = 0.0f;
      for (unsigned k = 0; k < 16; ++k) sum += a_rows[i / 2][k] * b_cols[i % 2][k];
      d[i] += sum;
    }
  }
};

// d += a * b for tf32 m16n8k8 (layouts in lab_mma.cuh): each operand's low 13 mantissa bits are dropped.
struct MmaTf32At {
  const char* file;
  int line;
  void operator()(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) const {
    WarpExchange x("lab_mma_1688_tf32", file, line);
    std::memcpy(x.mine().a, a, sizeof a);
    std::memcpy(x.mine().b, b, sizeof b);
    const MmaLane* lanes = x.exchange();
    const unsigned g = x.lane() / 4, t = x.lane() % 4;
    // A[r][k] sits in lane (r % 8) * 4 + k % 4, register (r >= 8) + 2 * (k >= 4); B[k][n] in lane n * 4 + k %
    // 4, register k >= 4.
    auto tf32 = [](uint32_t bits) { return __uint_as_float(bits & ~0x1fffu); };
    float a_rows[2][8], b_cols[2][8];
    for (unsigned k = 0; k < 8; ++k)
      for (unsigned h = 0; h < 2; ++h) {
        a_rows[h][k] = tf32(lanes[g * 4 + k % 4].a[h + 2 * (k >= 4)]);
        b_cols[h][k] = tf32(lanes[(2 * t + h) * 4 + k % 4].b[k >= 4]);
      }
    x.release();
    for (unsigned i = 0; i < 4; ++i) {
      float sum = 0.0f;
      for (unsigned k = 0; k < 8; ++k) sum += a_rows[i / 2][k] * b_cols[i % 2][k];
      d[i] += sum;
    }
  }
};

// ldmatrix of N 8x8 matrices, TRANS for .trans.
template <unsigned N, bool TRANS>
struct LdmatrixAt {
  const char* file;
  int line;
  void operator()(uint32_t (&r)[N], const void* row) const {
    WarpExchange x(N == 4 ? (TRANS ? "lab_ldmatrix_x4_trans" : "lab_ldmatrix_x4")
                          : (TRANS ? "lab_ldmatrix_x2_trans" : "lab_ldmatrix_x2"),
                   file, line);
    x.mine().row = row;
    const MmaLane* lanes = x.exchange();
    const unsigned g = x.lane() / 4, t = x.lane() % 4;
    for (unsigned i = 0; i < N; ++i) {
      const MmaLane* m = lanes + 8 * i;  // the lanes holding matrix i's row addresses
      if (TRANS)
        r[i] = uint32_t(row_element(m[2 * t].row, g)) | uint32_t(row_element(m[2 * t + 1].row, g)) << 16;
      else
        r[i] = uint32_t(row_element(m[g].row, 2 * t)) | uint32_t(row_element(m[g].row, 2 * t + 1)) << 16;
    }
    x.release();
  }
};

}  // namespace lab_emu

// lab_mma_16816<DT>(d, a, b) becomes lab_emu::MmaAt{__FILE__, __LINE__}.call<DT>(d, a, b); likewise the
// tf32 mma and the ldmatrix calls.
#define lab_mma_16816 lab_emu::MmaAt{__FILE__, __LINE__}.call
#define lab_mma_1688_tf32 \
  lab_emu::MmaTf32At {    \
    __FILE__, __LINE__    \
  }
#define lab_ldmatrix_x4           \
  lab_emu::LdmatrixAt<4, false> { \
    __FILE__, __LINE__            \
  }
#define lab_ldmatrix_x4_trans    \
  lab_emu::LdmatrixAt<4, true> { \
    __FILE__, __LINE__           \
  }
#define lab_ldmatrix_x2           \
  lab_emu::LdmatrixAt<2, false> { \
    __FILE__, __LINE__            \
  }
#define lab_ldmatrix_x2_trans    \
  lab_emu::LdmatrixAt<2, true> { \
    __FILE__, __LINE__           \
  }
