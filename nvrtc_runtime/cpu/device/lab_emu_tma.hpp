// kernels/common/lab_tma.cuh on the host: TMA bulk tensor copies done whole at issue time. A load reads the
// box (tiled) or the pixel column (im2col) of a lab::TensorMap that the cpu backend encoded
// (lab_emu_tensor_map.hpp), zero-fills elements outside the tensor, writes shared memory through the map's
// swizzle pattern, then completes the box's bytes on the mbarrier (lab_emu_mbarrier.hpp). A store reads the
// swizzled box from shared memory and writes the elements inside the tensor; commit / wait_group have nothing
// left to wait for. Errors end the launch at the call's file:line: a map that the cpu backend did not encode
// (a cuda map, or none), an operation of the other mode (tiled vs im2col) or rank, a shared address not
// 128-byte aligned (swizzled maps: not aligned to their 256/512/1024-byte pattern), an im2col start pixel
// outside the map's bounding box.
//
// Layout in shared memory, dense, dimension 0 fastest: tiled, ceil(box[d] / element_strides[d]) elements per
// dimension d, the element at box index i[d] read from coordinate c[d] + i[d] * element_strides[d]; im2col,
// pixels_per_column rows of channels_per_pixel elements, pixel p being the p-th position after the start
// pixel in the bounding box (W fastest, then H, D, then the next image), read at its position plus the
// im2col offsets. The bounding box is walked with the map's traversal strides of the spatial dimensions (a
// strided convolution): a position steps by element_strides[d] and, past the box's upper corner, goes back
// to the lower corner while the next dimension steps by its own stride.
#pragma once

#include "lab_swizzle.cuh"

namespace lab_emu {

// The map's emulator layout, refused when another backend (or nobody) encoded it or the call's mode / rank
// differs.
inline lab_emu_tensor_map tma_layout(const void* map, const char* file, int line) {
  lab_emu_tensor_map m;
  std::memcpy(&m, map, sizeof m);
  if (std::memcmp(m.magic, LAB_EMU_TENSOR_MAP_MAGIC, sizeof m.magic) != 0)
    fail(
        "the tensor map was not made by the cpu backend's Backend::tensor_map (a map from the cuda backend?)",
        file, line);
  return m;
}

inline lab_emu_tensor_map tma_map(const void* map, int mode, int rank, const char* file, int line) {
  const lab_emu_tensor_map m = tma_layout(map, file, line);
  if (m.mode != mode)
    fail(mode == LAB_EMU_TMAP_IM2COL ? "an im2col copy needs an im2col tensor map, this one is tiled"
                                     : "a tiled copy needs a tiled tensor map, this one is im2col",
         file, line);
  if (m.rank != rank) {
    char message[120];
    std::snprintf(message, sizeof message, "a %dD copy with a tensor map of rank %d", rank, int(m.rank));
    fail(message, file, line);
  }
  return m;
}

// A swizzled box starts on a pattern boundary (8 rows of the swizzle width), any box on 128 bytes.
inline void tma_check_shared(const lab_emu_tensor_map& m, const void* smem, const char* file, int line) {
  const unsigned long long align =
      m.swizzle != LAB_SWIZZLE_NONE ? 8ull * lab_swizzle_row_bytes(m.swizzle) : 128ull;
  if (reinterpret_cast<uintptr_t>(smem) % align != 0) {
    char message[160];
    std::snprintf(message, sizeof message, "TMA shared-memory address is not %llu-byte aligned%s", align,
                  m.swizzle != LAB_SWIZZLE_NONE ? " (the start of a swizzle pattern)" : "");
    fail(message, file, line);
  }
}

// Moves one element between the global tensor at coordinates `c` (zero / skipped outside it) and the box.
inline void tma_element(const lab_emu_tensor_map& m, const long long* c, unsigned char* smem,
                        unsigned long long box_offset, bool to_shared) {
  bool inside = true;
  unsigned long long global = m.address;
  for (int d = 0; d < m.rank; ++d) {
    inside = inside && c[d] >= 0 && (unsigned long long)c[d] < m.dims[d];
    global += (unsigned long long)c[d] * (d == 0 ? m.element_bytes : m.strides[d - 1]);
  }
  unsigned char* s = smem + lab_swizzle_address(m.swizzle, unsigned(box_offset));
  if (to_shared) {
    if (inside)
      std::memcpy(s, reinterpret_cast<const void*>(global), m.element_bytes);
    else
      std::memset(s, 0, m.element_bytes);
  } else if (inside) {
    std::memcpy(reinterpret_cast<void*>(global), s, m.element_bytes);
  }
}

// A tiled copy of the box at `coords` (rank of them) between the tensor and `smem`; returns its bytes.
inline unsigned long long tma_tiled(const void* map, int rank, const int* coords, unsigned char* smem,
                                    bool to_shared, const char* file, int line) {
  const lab_emu_tensor_map m = tma_map(map, LAB_EMU_TMAP_TILED, rank, file, line);
  tma_check_shared(m, smem, file, line);
  unsigned extent[5] = {1, 1, 1, 1, 1};
  unsigned long long count = 1;
  for (int d = 0; d < rank; ++d) {
    extent[d] = (m.box[d] + m.element_strides[d] - 1u) / m.element_strides[d];
    count *= extent[d];
  }
  unsigned i[5] = {};
  for (unsigned long long n = 0; n < count; ++n) {
    long long c[5];
    for (int d = 0; d < rank; ++d) c[d] = (long long)coords[d] + (long long)i[d] * m.element_strides[d];
    tma_element(m, c, smem, n * m.element_bytes, to_shared);
    for (int d = 0; d < rank && ++i[d] == extent[d]; ++d) i[d] = 0;
  }
  return count * m.element_bytes;
}

// An im2col load: pixels_per_column pixels of channels_per_pixel channels from the start pixel at `coords`
// (channel, then spatial, then image), each read at its position plus `offsets` (one per spatial dimension);
// positions advance by the traversal strides of the spatial dimensions.
inline unsigned long long tma_im2col(const void* map, int rank, const int* coords,
                                     const unsigned short* offsets, unsigned char* smem, const char* file,
                                     int line) {
  const lab_emu_tensor_map m = tma_map(map, LAB_EMU_TMAP_IM2COL, rank, file, line);
  tma_check_shared(m, smem, file, line);
  const int spatial = rank - 2;
  long long lo[3], hi[3], pos[3];
  for (int s = 0; s < spatial; ++s) {
    lo[s] = m.lower[s];
    hi[s] = (long long)m.dims[s + 1] - 1 + m.upper[s];
    pos[s] = coords[s + 1];
    if (pos[s] < lo[s] || pos[s] > hi[s])
      fail("im2col start pixel outside the tensor map's bounding box", file, line);
  }
  long long image = coords[rank - 1];
  unsigned long long offset = 0;
  for (unsigned p = 0; p < m.pixels_per_column; ++p) {
    for (unsigned ch = 0; ch < m.channels_per_pixel; ++ch, offset += m.element_bytes) {
      long long c[5];
      c[0] = (long long)coords[0] + ch;
      for (int s = 0; s < spatial; ++s) c[s + 1] = pos[s] + offsets[s];
      c[rank - 1] = image;
      tma_element(m, c, smem, offset, true);
    }
    int s = 0;
    while (s < spatial && (pos[s] += m.element_strides[s + 1]) > hi[s]) pos[s] = lo[s], ++s;
    if (s == spatial) ++image;
  }
  return offset;
}

template <int RANK>
inline void tma_load(void* smem, const void* map, uint64_t* bar, const int (&coords)[RANK], const char* file,
                     int line) {
  const unsigned long long bytes =
      tma_tiled(map, RANK, coords, static_cast<unsigned char*>(smem), true, file, line);
  mbar_complete_tx(bar, bytes, file, line);
}

template <int RANK>
inline void tma_store(const void* map, const void* smem, const int (&coords)[RANK], const char* file,
                      int line) {
  tma_tiled(map, RANK, coords, static_cast<unsigned char*>(const_cast<void*>(smem)), false, file, line);
}

}  // namespace lab_emu

inline void lab_tma_load_1d(void* smem, const void* map, uint64_t* bar, int c0,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_load<1>(smem, map, bar, {c0}, file, line);
}
inline void lab_tma_load_2d(void* smem, const void* map, uint64_t* bar, int c0, int c1,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_load<2>(smem, map, bar, {c0, c1}, file, line);
}
inline void lab_tma_load_3d(void* smem, const void* map, uint64_t* bar, int c0, int c1, int c2,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_load<3>(smem, map, bar, {c0, c1, c2}, file, line);
}
inline void lab_tma_load_4d(void* smem, const void* map, uint64_t* bar, int c0, int c1, int c2, int c3,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_load<4>(smem, map, bar, {c0, c1, c2, c3}, file, line);
}
inline void lab_tma_load_5d(void* smem, const void* map, uint64_t* bar, int c0, int c1, int c2, int c3,
                            int c4, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_load<5>(smem, map, bar, {c0, c1, c2, c3, c4}, file, line);
}

inline void lab_tma_load_im2col_4d(void* smem, const void* map, uint64_t* bar, int c, int w, int h, int n,
                                   unsigned short offset_w, unsigned short offset_h,
                                   const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const int coords[4] = {c, w, h, n};
  const unsigned short offsets[2] = {offset_w, offset_h};
  const unsigned long long bytes =
      lab_emu::tma_im2col(map, 4, coords, offsets, static_cast<unsigned char*>(smem), file, line);
  lab_emu::mbar_complete_tx(bar, bytes, file, line);
}

inline void lab_tma_store_1d(const void* map, const void* smem, int c0, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  lab_emu::tma_store<1>(map, smem, {c0}, file, line);
}
inline void lab_tma_store_2d(const void* map, const void* smem, int c0, int c1,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_store<2>(map, smem, {c0, c1}, file, line);
}
inline void lab_tma_store_3d(const void* map, const void* smem, int c0, int c1, int c2,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_store<3>(map, smem, {c0, c1, c2}, file, line);
}
inline void lab_tma_store_4d(const void* map, const void* smem, int c0, int c1, int c2, int c3,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_store<4>(map, smem, {c0, c1, c2, c3}, file, line);
}
inline void lab_tma_store_5d(const void* map, const void* smem, int c0, int c1, int c2, int c3, int c4,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  lab_emu::tma_store<5>(map, smem, {c0, c1, c2, c3, c4}, file, line);
}
inline void lab_tma_store_commit() {}
template <int PENDING>
inline void lab_tma_store_wait_read() {}

// Checks the map as a copy would (prefetch.tensormap has no effect on the emulator).
inline void lab_tma_prefetch_map(const void* map, const char* file = __builtin_FILE(),
                                 int line = __builtin_LINE()) {
  lab_emu::tma_layout(map, file, line);
}
