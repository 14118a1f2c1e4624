// kernels/common/lab_wgmma.cuh on the host: lab_wgmma_desc, lab_wgmma_ss / _rs (m64nNk16 fp16 / bfloat16,
// m64nNk32 e4m3 and, SS only, m64nNk8 tf32; float accumulators), lab_e4m3x2 / lab_e4m3_to_float
// (lab_emu_e4m3.hpp), lab_wgmma_fence / _commit_group / _wait_group / _hold, lab_fence_proxy_async_shared,
// lab_setmaxnreg_inc / _dec and lab_smem_address, with the per-thread layouts documented in lab_wgmma.cuh.
//
// Shared addresses: the emulator's shared window is the block's dynamic shared memory (LAB_DYNAMIC_SHARED),
// at address 0. lab_smem_address and lab_wgmma_desc give offsets into it and fail the launch, at their line,
// for a pointer outside it (static __shared__ arrays cannot hold wgmma operands here) or, for a descriptor,
// one that is not 16-byte aligned. A descriptor is decoded from its bits as the hardware reads it: start,
// leading and stride byte offsets, swizzle mode; the canonical layouts and the swizzle (lab_swizzle.cuh, on
// the absolute address) give each element's address. Base offsets other than 0 are not modelled (an error).
//
// Asynchrony: a wgmma call records the product in its thread's list of pending products; A fragments (RS
// form) are copied at the call, as the hardware reads registers at issue. lab_wgmma_commit_group closes a
// group of them and lab_wgmma_wait_group<P> executes, in issue order, every product of all committed groups
// but the newest P. So D changes only at the wait. The shared operands of a product are read once for the
// warpgroup, when the first of its threads waits for it (threads of other warps may still be behind: they
// use the same values): a kernel that reads the accumulators before waiting, or overwrites its operands
// before the wait, gets wrong answers here, as on the GPU.
//
// Checks at the call's line: the warpgroup is whole (warps 4k..4k+3 exist in the block), all 32 lanes of the
// warp make the same call (as for lab_mma_16816), every element the descriptors address lies in the block's
// dynamic shared memory, a swizzled operand's slice stays inside its swizzled row. Not checked: that the 4
// warps issue the same sequence, wgmma.fence placement, and the proxy fence before the barrier (both
// no-ops here, as are setmaxnreg and lab_wgmma_hold).
//
// Numerics: inputs are exact in float, so are their products (barring bfloat16 products beyond float's
// range). tf32 (LAB_F32): each float operand is read with its 13 low mantissa bits dropped (truncation toward
// zero; the assumption that the tensor cores read only the tf32 bits of a raw float, as lab_emu_mma.hpp's
// mma.sync tf32 does, is checked against the H200 bit for bit by tests/test_emulator_wgmma_tf32.cpp's [gpu]
// test), so its 11-bit-significand products are exact in float too. Each output sums its 16 (e4m3: 32,
// tf32: 8) products in float in k order and adds the sum to D (or to 0 when
// scale_d is 0), as lab_emu_mma.hpp does. The tensor cores accumulate in another order (and, for e4m3, with
// fewer mantissa bits than float): results may differ from the GPU's in the last bits. The e4m3 conversions
// are the hardware's exactly (rounding, saturation, NaN).
#pragma once

#include <vector>

#include "lab_emu_e4m3.hpp"
#include "lab_swizzle.cuh"

// lab_wgmma.cuh defines them again, identically.
#define LAB_WGMMA_VALID_N(N) \
  ((N) == 8 || (N) == 16 || (N) == 32 || (N) == 64 || (N) == 128 || (N) == 176 || (N) == 192 || (N) == 256)
#define LAB_E4M3 2
#define LAB_F32 3

inline uint16_t lab_e4m3x2(float lo, float hi) {
  return uint16_t(lab_emu::e4m3_from_float(lo) | lab_emu::e4m3_from_float(hi) << 8);
}
inline float lab_e4m3_to_float(unsigned char bits) {
  return lab_emu::e4m3_to_float(bits);
}

namespace lab_emu {

// A matrix descriptor decoded from its bits (PTX ISA, "Matrix Descriptor Format").
struct WgmmaDesc {
  unsigned start, leading, stride, base_offset;
  int swizzle;
  explicit WgmmaDesc(unsigned long long bits)
      : start(unsigned(bits & 0x3fffu) << 4),
        leading(unsigned(bits >> 16 & 0x3fffu) << 4),
        stride(unsigned(bits >> 32 & 0x3fffu) << 4),
        base_offset(unsigned(bits >> 49 & 7u)),
        swizzle(int(bits >> 62)) {}
  // The shared address of element (i, k), i the M index of A or the N index of B, k < 16 (e4m3, `bytes` 1:
  // k < 32; tf32, `bytes` 4: k < 8; both K-major only) (the canonical layouts of lab_wgmma.cuh), swizzled.
  unsigned address(bool mn_major, unsigned i, unsigned k, unsigned bytes = 2) const {
    const unsigned w = lab_swizzle_row_bytes(swizzle), row_k = 16 / bytes;  // k per 16-byte core row
    unsigned offset;
    if (swizzle == LAB_SWIZZLE_NONE)
      offset = mn_major ? i % 8 * 2 + i / 8 * stride + k % 8 * 16 + k / 8 * leading
                        : i % 8 * 16 + i / 8 * stride + k % row_k * bytes + k / row_k * leading;
    else
      offset = mn_major ? i % (w / 2) * 2 + i / (w / 2) * leading + k % 8 * w + k / 8 * stride
                        : i % 8 * w + i / 8 * stride + k * bytes;
    return lab_swizzle_address(swizzle, start + offset);
  }
};

inline const char* swizzle_name(int mode) {
  return mode == LAB_SWIZZLE_128B  ? "128B"
         : mode == LAB_SWIZZLE_64B ? "64B"
         : mode == LAB_SWIZZLE_32B ? "32B"
                                   : "none";
}

inline unsigned block_thread_count() {
  const lab_emu_dim3 d = tls_self->block->block_dim;
  return d.x * d.y * d.z;
}

// Offset of `p` in the block's dynamic shared memory (the emulator's shared window), or `fail` at the call.
inline unsigned shared_offset(const void* p, const char* what, const char* file, int line) {
  const char* base = static_cast<const char*>(tls_self->block->dynamic_shared);
  const char* q = static_cast<const char*>(p);
  if (q < base || q >= base + tls_self->block->dynamic_shared_bytes) {
    char message[200];
    std::snprintf(
        message, sizeof message,
        "%s: the pointer is not in the block's %llu bytes of dynamic shared memory (on the emulator "
        "the shared window of wgmma operands is LAB_DYNAMIC_SHARED)",
        what, tls_self->block->dynamic_shared_bytes);
    fail(message, file, line);
  }
  return unsigned(q - base);
}

struct SmemAddressAt {
  const char* file;
  int line;
  uint32_t operator()(const void* p) const { return shared_offset(p, "lab_smem_address", file, line); }
};

struct WgmmaDescAt {
  const char* file;
  int line;
  unsigned long long operator()(const void* start, unsigned leading_bytes, unsigned stride_bytes,
                                int swizzle) const {
    const unsigned address = shared_offset(start, "lab_wgmma_desc", file, line);
    if (address % 16 != 0) {
      char message[120];
      std::snprintf(message, sizeof message,
                    "lab_wgmma_desc: the matrix start (shared address 0x%x) is not 16-byte aligned", address);
      fail(message, file, line);
    }
    return lab_wgmma_desc_bits(address, leading_bytes, stride_bytes, swizzle);
  }
};

// One product a thread has issued and not yet executed.
struct WgmmaOp {
  static constexpr unsigned kUncommitted = ~0u;
  float* d;
  int n, dt;
  bool a_in_registers, a_mn_major, b_mn_major, scale_d;
  unsigned long long desc_a, desc_b;
  float a_rows[2][32];  // RS form: this thread's A rows 16 w + g and 16 w + g + 8 (k < 16, e4m3 32), at issue
  unsigned index;       // the warpgroup's how-manieth product (every thread issues the same sequence)
  unsigned group;       // the commit group, or kUncommitted
};

// A thread's pending products and its counts of issued products and committed groups.
struct WgmmaThread {
  unsigned long long run = ~0ull;  // the block run they belong to (lab_emu_block::run)
  std::vector<WgmmaOp> ops;
  unsigned issued = 0, commits = 0;
};

// The shared-memory operands of one product as float, read once for the whole warpgroup: by the first of its
// threads to wait for the product (the operands must stay unchanged until then, as on the GPU).
struct WgmmaOperands {
  bool read = false;
  unsigned users = 0;       // threads that have executed the product
  std::vector<float> a, b;  // a [64][K] (SS form), b [n][K]; K 16 (e4m3: 32, tf32: 8)
};

struct WgmmaWarpgroup {
  unsigned long long run = ~0ull;
  std::vector<WgmmaOperands> products;  // by WgmmaOp::index
};

// The calling thread's record, and its warpgroup's; a previous block's (a thread that exited without
// waiting, a failed launch) is dropped.
inline WgmmaThread& wgmma_thread() {
  static thread_local std::vector<WgmmaThread> threads;  // [linear thread index], the running block's
  if (threads.size() < block_thread_count()) threads.resize(block_thread_count());
  WgmmaThread& t = threads[tls_self->linear_idx];
  if (t.run != tls_self->block->run) t = WgmmaThread{tls_self->block->run, {}, 0, 0};
  return t;
}
inline WgmmaWarpgroup& wgmma_warpgroup() {
  static thread_local std::vector<WgmmaWarpgroup> groups;  // [warpgroup], the running block's
  const unsigned index = tls_self->linear_idx / 128;
  if (groups.size() <= index) groups.resize(index + 1);
  WgmmaWarpgroup& g = groups[index];
  if (g.run != tls_self->block->run) g = WgmmaWarpgroup{tls_self->block->run, {}};
  return g;
}

// The K of one product and the bytes of one element, by input type.
constexpr unsigned wgmma_k(int dt) {
  return dt == LAB_E4M3 ? 32 : dt == LAB_F32 ? 8 : 16;
}
constexpr unsigned wgmma_element_bytes(int dt) {
  return dt == LAB_E4M3 ? 1 : dt == LAB_F32 ? 4 : 2;
}

template <int DT>
inline float shared_element(unsigned address) {
  const char* p = static_cast<const char*>(tls_self->block->dynamic_shared) + address;
  if constexpr (DT == LAB_E4M3) {
    return e4m3_to_float(uint8_t(*p));
  } else if constexpr (DT == LAB_F32) {
    uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return __uint_as_float(bits & ~0x1fffu);  // the tf32 bits the tensor cores read
  } else {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return lab_to_float<DT>(v);
  }
}

template <int DT>
inline void read_operands(const WgmmaOp& op, WgmmaOperands& o) {
  constexpr unsigned K = wgmma_k(DT), bytes = wgmma_element_bytes(DT);
  if (!op.a_in_registers) {
    const WgmmaDesc da(op.desc_a);
    o.a.resize(64 * K);
    for (unsigned r = 0; r < 64; ++r)
      for (unsigned k = 0; k < K; ++k)
        o.a[r * K + k] = shared_element<DT>(da.address(op.a_mn_major, r, k, bytes));
  }
  const WgmmaDesc db(op.desc_b);
  o.b.resize(size_t(op.n) * K);
  for (unsigned c = 0; c < unsigned(op.n); ++c)
    for (unsigned k = 0; k < K; ++k) o.b[c * K + k] = shared_element<DT>(db.address(op.b_mn_major, c, k, bytes));
  o.read = true;
}

// Executes one product for this thread's accumulator elements (layout in lab_wgmma.cuh).
template <int DT>
inline void execute_wgmma(const WgmmaOp& op) {
  WgmmaWarpgroup& group = wgmma_warpgroup();
  if (group.products.size() <= op.index) group.products.resize(op.index + 1);
  WgmmaOperands& o = group.products[op.index];
  if (!o.read) read_operands<DT>(op, o);
  constexpr unsigned K = wgmma_k(DT);
  const unsigned t = tls_self->linear_idx % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
  float a[2][K];
  for (unsigned h = 0; h < 2; ++h)
    for (unsigned k = 0; k < K; ++k)
      a[h][k] = op.a_in_registers ? op.a_rows[h][k] : o.a[(16 * w + g + 8 * h) * K + k];
  for (int j = 0; j < op.n / 8; ++j)  // the 8 columns of d[4 j .. 4 j + 3]
    for (unsigned e = 0; e < 2; ++e) {
      const float* b = &o.b[(8 * unsigned(j) + 2 * q + e) * K];
      for (unsigned h = 0; h < 2; ++h) {
        float sum = 0.0f;
        for (unsigned k = 0; k < K; ++k) sum += a[h][k] * b[k];
        float& d = op.d[4 * j + 2 * h + e];
        d = (op.scale_d ? d : 0.0f) + sum;
      }
    }
  if (++o.users == 128) o = WgmmaOperands{true, 128, {}, {}};
}

// The function objects behind the lab_wgmma_ss / lab_wgmma_rs macros below: each carries its call site.
struct WgmmaAt {
  const char* file;
  int line;

  template <int DT, int N, int TRANS_A, int TRANS_B>
  void ss(float (&d)[N / 2], unsigned long long desc_a, unsigned long long desc_b, int scale_d) const {
    static_assert(LAB_WGMMA_VALID_N(N), "N is 8, 16, 32, 64, 128, 176, 192 or 256");
    static_assert(DT == LAB_F16 || DT == LAB_BF16 || DT == LAB_E4M3 || DT == LAB_F32,
                  "the element type is LAB_F16, LAB_BF16, LAB_E4M3 or LAB_F32");
    static_assert(DT != LAB_E4M3 || (TRANS_A == 0 && TRANS_B == 0), "e4m3 operands are K-major");
    static_assert(DT != LAB_F32 || (TRANS_A == 0 && TRANS_B == 0), "tf32 operands are K-major");
    WarpExchange x("lab_wgmma_ss", file, line);
    issue(x, WgmmaOp{d, N, DT, false, TRANS_A != 0, TRANS_B != 0, scale_d != 0, desc_a, desc_b, {}, 0, 0});
  }

  template <int DT, int N, int TRANS_B>
  void rs(float (&d)[N / 2], const uint32_t (&a)[4], unsigned long long desc_b, int scale_d) const {
    static_assert(LAB_WGMMA_VALID_N(N), "N is 8, 16, 32, 64, 128, 176, 192 or 256");
    static_assert(DT == LAB_F16 || DT == LAB_BF16 || DT == LAB_E4M3,
                  "the element type is LAB_F16, LAB_BF16 or LAB_E4M3");
    static_assert(DT != LAB_E4M3 || TRANS_B == 0, "e4m3 operands are K-major");
    static_assert(DT != LAB_F32, "tf32 products take A from shared memory (lab_wgmma_ss)");
    WarpExchange x("lab_wgmma_rs", file, line);
    std::memcpy(x.mine().a, a, sizeof a);
    issue(x, WgmmaOp{d, N, DT, true, false, TRANS_B != 0, scale_d != 0, 0, desc_b, {}, 0, 0});
  }

 private:
  [[noreturn]] void fail_here(const char* message) const { fail(message, file, line); }

  void check_warpgroup() const {
    const unsigned group = tls_self->linear_idx / 128, threads = block_thread_count();
    if (threads < 128 * (group + 1)) {
      char message[220];
      std::snprintf(message, sizeof message,
                    "wgmma is issued by a warpgroup of 4 whole warps (threads %u-%u of the block), but the "
                    "block has %u threads",
                    128 * group, 128 * group + 127, threads);
      fail_here(message);
    }
  }

  // Every element operand `which` of `rows` x K (16, e4m3 32, tf32 8) addresses lies in dynamic shared
  // memory, and a swizzled operand's slice stays in its swizzled row (K-major: the 32 bytes of k; MN-major:
  // rows start aligned).
  void check_operand(const char* which, unsigned long long bits, bool mn_major, unsigned rows, int dt) const {
    const WgmmaDesc desc(bits);
    char message[260];
    if (desc.base_offset != 0) {
      std::snprintf(message, sizeof message,
                    "wgmma: the %s descriptor has base offset %u, which the emulator does not model "
                    "(lab_wgmma_desc makes 0: patterns starting on their 8-row boundary)",
                    which, desc.base_offset);
      fail_here(message);
    }
    const unsigned w = lab_swizzle_row_bytes(desc.swizzle);
    if (desc.swizzle != LAB_SWIZZLE_NONE && (mn_major ? desc.start % w != 0 : desc.start % w + 32 > w)) {
      std::snprintf(message, sizeof message,
                    "wgmma: the %s matrix (%s-major, swizzle %s) starts at shared address 0x%x, so its slice "
                    "crosses a %u-byte swizzled row",
                    which, mn_major ? "MN" : "K", swizzle_name(desc.swizzle), desc.start, w);
      fail_here(message);
    }
    const unsigned long long bytes = tls_self->block->dynamic_shared_bytes;
    const unsigned element = wgmma_element_bytes(dt);
    for (unsigned i = 0; i < rows; ++i)
      for (unsigned k = 0; k < wgmma_k(dt); ++k)
        if (const unsigned address = desc.address(mn_major, i, k, element); address + element > bytes) {
          std::snprintf(message, sizeof message,
                        "wgmma: the %s matrix (descriptor start 0x%x, leading byte offset %u, stride byte "
                        "offset %u, swizzle %s) reads shared address 0x%x, past the block's %llu bytes of "
                        "dynamic shared memory",
                        which, desc.start, desc.leading, desc.stride, swizzle_name(desc.swizzle), address,
                        bytes);
          fail_here(message);
        }
  }

  void issue(WarpExchange& x, WgmmaOp op) const {
    check_warpgroup();
    const MmaLane* lanes = x.exchange();
    if (op.a_in_registers && op.dt == LAB_E4M3) {
      // A[r][k] of the warp's 16 rows sits in lane (r % 8) * 4 + (k % 16) / 4, register (r >= 8) + 2 (k >=
      // 16), byte k % 4.
      const unsigned g = x.lane() / 4;
      for (unsigned h = 0; h < 2; ++h)
        for (unsigned k = 0; k < 32; ++k)
          op.a_rows[h][k] = e4m3_to_float(uint8_t(lanes[g * 4 + k % 16 / 4].a[h + 2 * (k >= 16)] >> 8 * (k % 4)));
    } else if (op.a_in_registers) {
      // A[r][k] of the warp's 16 rows sits in lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8).
      const unsigned g = x.lane() / 4;
      for (unsigned h = 0; h < 2; ++h)
        for (unsigned k = 0; k < 16; ++k)
          op.a_rows[h][k] =
              op.dt == LAB_F16
                  ? lab_to_float<LAB_F16>(half_of(lanes[g * 4 + k % 8 / 2].a[h + 2 * (k >= 8)], k))
                  : lab_to_float<LAB_BF16>(half_of(lanes[g * 4 + k % 8 / 2].a[h + 2 * (k >= 8)], k));
    }
    x.release();
    if (tls_self->linear_idx % 128 == 0) {  // once per warpgroup: the operands are the same for all threads
      if (!op.a_in_registers) check_operand("A", op.desc_a, op.a_mn_major, 64, op.dt);
      check_operand("B", op.desc_b, op.b_mn_major, unsigned(op.n), op.dt);
    }
    WgmmaThread& thread = wgmma_thread();
    op.index = thread.issued++;
    op.group = WgmmaOp::kUncommitted;
    thread.ops.push_back(op);
  }
};

}  // namespace lab_emu

inline void lab_wgmma_fence() {}
inline void lab_wgmma_commit_group() {
  lab_emu::WgmmaThread& t = lab_emu::wgmma_thread();
  for (lab_emu::WgmmaOp& op : t.ops)
    if (op.group == lab_emu::WgmmaOp::kUncommitted) op.group = t.commits;
  ++t.commits;
}
// Executes the products of every committed group but the newest PENDING, in issue order.
template <int PENDING>
inline void lab_wgmma_wait_group() {
  lab_emu::WgmmaThread& t = lab_emu::wgmma_thread();
  size_t kept = 0;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const lab_emu::WgmmaOp& op = t.ops[i];
    if (op.group != lab_emu::WgmmaOp::kUncommitted && op.group + PENDING < t.commits) {
      if (op.dt == LAB_F16)
        lab_emu::execute_wgmma<LAB_F16>(op);
      else if (op.dt == LAB_E4M3)
        lab_emu::execute_wgmma<LAB_E4M3>(op);
      else if (op.dt == LAB_F32)
        lab_emu::execute_wgmma<LAB_F32>(op);
      else
        lab_emu::execute_wgmma<LAB_BF16>(op);
    } else {
      t.ops[kept++] = op;
    }
  }
  t.ops.resize(kept);
}
template <int COUNT>
inline void lab_wgmma_hold(float (&)[COUNT]) {}
inline void lab_fence_proxy_async_shared() {}
template <int R>
inline void lab_setmaxnreg_inc() {}
template <int R>
inline void lab_setmaxnreg_dec() {}

// lab_wgmma_ss<DT, N, TA, TB>(...) becomes lab_emu::WgmmaAt{__FILE__, __LINE__}.ss<DT, N, TA, TB>(...);
// likewise lab_wgmma_rs, lab_wgmma_desc and lab_smem_address.
#define lab_wgmma_ss lab_emu::WgmmaAt{__FILE__, __LINE__}.ss
#define lab_wgmma_rs lab_emu::WgmmaAt{__FILE__, __LINE__}.rs
#define lab_wgmma_desc   \
  lab_emu::WgmmaDescAt { \
    __FILE__, __LINE__   \
  }
#define lab_smem_address   \
  lab_emu::SmemAddressAt { \
    __FILE__, __LINE__     \
  }
