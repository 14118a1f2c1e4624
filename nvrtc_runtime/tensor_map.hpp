// Tensor maps (the descriptors of TMA bulk tensor copies) described on the host: element type, rank 1-5, the
// tensor's place in a DeviceBuffer, dimensions, byte strides, the box one copy moves, traversal strides,
// swizzle, L2 promotion, and for im2col maps the pixel bounding box. Out-of-bounds elements always read as
// zero and interleave is always none. check_tensor_map applies the driver's rules with a one-line error
// naming the field; Backend::tensor_map turns a checked description into the 128 bytes a kernel takes
// (lab::TensorMap): the driver's encoding on cuda (cuda_tensor_map.cpp), the emulator's on cpu
// (emulator_tensor_map below).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/lab_tensor_map.cuh"

namespace lab {

class DeviceBuffer;

// Numbered as the driver's CUtensorMapDataType, CUtensorMapSwizzle and CUtensorMapL2promotion.
enum class TensorElement { U8, U16, U32, I32, U64, I64, F16, F32, F64, BF16 };
enum class TensorSwizzle { None, B32, B64, B128 };
enum class TensorL2Promotion { None, B64, B128, B256 };

size_t element_bytes(TensorElement element);
// The span of a swizzle pattern's rows in bytes: 0 (none), 32, 64 or 128.
unsigned swizzle_bytes(TensorSwizzle swizzle);
// Its LAB_SWIZZLE_* code (kernels/common/lab_swizzle.cuh), as kernels and the emulator name it.
int swizzle_mode(TensorSwizzle swizzle);

// The pixel box of an im2col map, per spatial dimension (dimensions 1..rank-2, W first): pixels are taken
// from [lower, dims - 1 + upper], the positions a filter's first tap visits.
struct Im2colBox {
  std::array<int, 3> lower{}, upper{};
  uint32_t channels_per_pixel = 0;  // elements of dimension 0 per pixel (1-256)
  uint32_t pixels_per_column = 0;   // pixels per copy (1-1024)
};

struct TensorMapDesc {
  TensorElement element = TensorElement::F32;
  int rank = 0;                          // 1-5; im2col 3-5 (NWC, NHWC, NDHWC)
  const DeviceBuffer* buffer = nullptr;  // the tensor's memory
  size_t offset_bytes = 0;               // where element 0 lies in it (the address must be 16-byte aligned)
  std::array<uint64_t, 5> dims{};        // elements per dimension, dimension 0 innermost (contiguous)
  std::array<uint64_t, 4> strides{};     // bytes between indices of dimensions 1..rank-1 (multiples of 16)
  std::array<uint32_t, 5> box{};         // tiled: elements per copy and dimension (1-256); unused by im2col
  std::array<uint32_t, 5> element_strides{1, 1, 1, 1, 1};  // traversal step (1-8; im2col: spatial only)
  TensorSwizzle swizzle = TensorSwizzle::None;
  TensorL2Promotion l2_promotion = TensorL2Promotion::None;
  bool im2col = false;
  Im2colBox pixels;  // im2col only

  void* address() const;
};

// A dense tensor of `dims` (innermost first) at the start of `buffer`, strides from the dims, copied in
// boxes of `box` (same count): the usual tiled map.
TensorMapDesc dense_tensor_map(TensorElement element, const DeviceBuffer& buffer,
                               const std::vector<uint64_t>& dims, const std::vector<uint32_t>& box);

// Throws UsageError, "tensor map: <field> ...", when the description breaks a rule of cuTensorMapEncodeTiled
// / cuTensorMapEncodeIm2col or reaches past its buffer.
void check_tensor_map(const TensorMapDesc& desc);

// The cpu emulator's encoding (lab_emu_tensor_map.hpp) of a description; checks it first.
TensorMap emulator_tensor_map(const TensorMapDesc& desc);

}  // namespace lab
