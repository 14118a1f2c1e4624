// The emulator's layout of the 128 bytes of a lab::TensorMap: written by the cpu backend
// (nvrtc_runtime/tensor_map.cpp) from a checked TensorMapDesc, read by the TMA copies of lab_emu_tma.hpp. It
// starts with a magic string, so a map encoded by the cuda driver (or never encoded) is recognised and
// refused. Dimension 0 is the innermost (contiguous) one, as in cuTensorMapEncodeTiled.
#pragma once

#define LAB_EMU_TENSOR_MAP_MAGIC "labemutm"

enum lab_emu_tensor_map_mode { LAB_EMU_TMAP_TILED = 1, LAB_EMU_TMAP_IM2COL = 2 };

typedef struct lab_emu_tensor_map {
  char magic[8];                     // LAB_EMU_TENSOR_MAP_MAGIC, no terminator
  unsigned long long address;        // global address of element 0
  unsigned long long dims[5];        // elements per dimension
  unsigned long long strides[4];     // bytes between consecutive indices of dimensions 1..rank-1
  unsigned short box[5];             // tiled: box size per dimension (1-256); im2col: unused
  unsigned char element_strides[5];  // traversal step per dimension (1-8)
  unsigned char rank;                // 1-5 (im2col: 3-5)
  unsigned char mode;                // lab_emu_tensor_map_mode
  unsigned char swizzle;             // LAB_SWIZZLE_* of lab_swizzle.cuh
  unsigned char element_bytes;       // 1, 2, 4 or 8
  short lower[3], upper[3];          // im2col bounding box corners of the spatial dimensions 1..rank-2
  unsigned short channels_per_pixel, pixels_per_column;  // im2col
} lab_emu_tensor_map;
