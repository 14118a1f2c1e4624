// nvcuda::wmma on the host: the TF32 subset of CUDA's warp matrix API (fragment<matrix_a / matrix_b,
// 16, 16, 8, precision::tf32, row_major / col_major>, fragment<accumulator, 16, 16, 8, float>, fill_fragment,
// load_matrix_sync, mma_sync, store_matrix_sync, __float_to_tf32). Other shapes and types do not compile.
//
// CUDA leaves the mapping of tile elements to lanes opaque, so here EVERY lane holds the whole tile
// (num_elements = rows * cols, x[] row-major): load reads the whole tile, mma_sync computes the whole product
// in every lane, store writes the whole tile (every lane the same values). Kernels that touch x[]
// element-wise (scaling, __float_to_tf32) therefore work unchanged; kernels that assume CUDA's hardware
// layout do not. Numerics: the tensor cores read only the top 19 bits (sign, 8 exponent, 10 mantissa) of each
// tf32 operand, so mma_sync truncates its inputs likewise; products of two tf32 values are exact in float and
// are summed in float in k order onto the accumulator. __float_to_tf32 rounds to nearest, ties away from
// zero, as cvt.rna.tf32.f32 does. load_matrix_sync, store_matrix_sync and mma_sync are warp collectives in
// CUDA: each acts first, then waits for every lane of the warp like __syncwarp (carrying the call's file and
// line), so a call in divergent code is reported as a collective that never completes, while a missing
// __syncwarp before reading other lanes' shared-memory writes still shows up as it would on the GPU.
#pragma once

namespace nvcuda {
namespace wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}  // namespace precision

enum layout_t { mem_row_major, mem_col_major };

// cvt.rna.tf32.f32: keep 10 mantissa bits, round to nearest with ties away from zero (adding half an ulp
// of the kept bits to the magnitude, then truncating). Infinities and NaN pass through.
inline float __float_to_tf32(float in) {
  uint32_t bits;
  std::memcpy(&bits, &in, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

namespace detail {

// What the tensor cores see of a tf32 operand: the low 13 mantissa bits are ignored.
inline float tf32_operand(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits &= 0xffffe000u;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

template <class Use, int M, int N, int K>
struct tile_shape;
template <int M, int N, int K>
struct tile_shape<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct tile_shape<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct tile_shape<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N;
};

template <class Use, class T>
constexpr bool supported_element = std::is_same_v<T, precision::tf32> && !std::is_same_v<Use, accumulator>;
template <>
constexpr bool supported_element<accumulator, float> = true;

template <class Layout>
constexpr bool is_row_major = std::is_same_v<Layout, row_major>;

// Every lane of the warp reaches the collective at file:line.
inline void warp_collective(const char* file, int line) {
  ::lab_emu::warp_sync(LAB_EMU_SYNCWARP, 0xffffffffu, 0, 0, 32, file, line);
}

}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 8, "the cpu emulator provides wmma m16n16k8 only");
  static_assert(detail::supported_element<Use, T>,
                "the cpu emulator provides wmma precision::tf32 operands with a float accumulator only");

 public:
  static constexpr int rows = detail::tile_shape<Use, M, N, K>::rows;
  static constexpr int cols = detail::tile_shape<Use, M, N, K>::cols;
  enum { num_elements = rows * cols, num_storage_elements = rows * cols };
  using element_type = T;
  using storage_element_type = float;
  float x[num_elements];  // the whole tile in every lane, x[row * cols + col]
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  for (float& v : f.x) v = value;
}

// The function objects behind the *_sync macros below: each carries its call site.
struct load_matrix_sync_at {
  const char* file;
  int line;
  // matrix_a / matrix_b: the memory layout is the fragment's; element (r, c) at p[r * ldm + c] (row_major) or
  // p[c * ldm + r] (col_major).
  template <class Use, class Layout>
  void operator()(fragment<Use, 16, 16, 8, precision::tf32, Layout>& f, const float* p, unsigned ldm) const {
    using F = fragment<Use, 16, 16, 8, precision::tf32, Layout>;
    for (int r = 0; r < F::rows; ++r)
      for (int c = 0; c < F::cols; ++c)
        f.x[r * F::cols + c] = detail::is_row_major<Layout> ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
    detail::warp_collective(file, line);
  }
  void operator()(fragment<accumulator, 16, 16, 8, float>& f, const float* p, unsigned ldm,
                  layout_t layout) const {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c)
        f.x[r * 16 + c] = layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
    detail::warp_collective(file, line);
  }
};

struct store_matrix_sync_at {
  const char* file;
  int line;
  void operator()(float* p, const fragment<accumulator, 16, 16, 8, float>& f, unsigned ldm,
                  layout_t layout) const {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c)
        (layout == mem_row_major ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]) = f.x[r * 16 + c];
    detail::warp_collective(file, line);
  }
};

struct mma_sync_at {
  const char* file;
  int line;
  // d = a * b + c; d may be c.
  template <class LayoutA, class LayoutB>
  void operator()(fragment<accumulator, 16, 16, 8, float>& d,
                  const fragment<matrix_a, 16, 16, 8, precision::tf32, LayoutA>& a,
                  const fragment<matrix_b, 16, 16, 8, precision::tf32, LayoutB>& b,
                  const fragment<accumulator, 16, 16, 8, float>& c) const {
    float at[16 * 8], bt[8 * 16];
    for (int i = 0; i < 16 * 8; ++i) at[i] = detail::tf32_operand(a.x[i]);
    for (int i = 0; i < 8 * 16; ++i) bt[i] = detail::tf32_operand(b.x[i]);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        float sum = 0.0f;
        for (int k = 0; k < 8; ++k) sum += at[m * 8 + k] * bt[k * 16 + n];
        d.x[m * 16 + n] = c.x[m * 16 + n] + sum;
      }
    detail::warp_collective(file, line);
  }
};

}  // namespace wmma
}  // namespace nvcuda

// wmma::load_matrix_sync(...) becomes wmma::load_matrix_sync_at{__FILE__, __LINE__}(...), qualified or not.
#define load_matrix_sync \
  load_matrix_sync_at {  \
    __FILE__, __LINE__   \
  }
#define store_matrix_sync \
  store_matrix_sync_at {  \
    __FILE__, __LINE__    \
  }
#define mma_sync       \
  mma_sync_at {        \
    __FILE__, __LINE__ \
  }
