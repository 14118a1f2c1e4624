// Tensor map descriptions: the driver's rules, checked with one-line errors, and the emulator's encoding.
#include "nvrtc_runtime/tensor_map.hpp"

#include <cstring>
#include <string>

#include "kernels/common/lab_swizzle.cuh"
#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/cpu/device/lab_emu_tensor_map.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& rule) {
  throw UsageError("tensor map: " + field + " " + rule);
}

std::string indexed(const std::string& field, int i) {
  return field + "[" + std::to_string(i) + "]";
}

void check_range(const std::string& field, long long value, long long lo, long long hi) {
  if (value < lo || value > hi)
    refuse(field,
           "= " + std::to_string(value) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
}

// The inner extent of one copy in bytes: a box row (tiled) or a pixel's channels (im2col).
uint64_t inner_bytes(const TensorMapDesc& d) {
  return uint64_t(d.im2col ? d.pixels.channels_per_pixel : d.box[0]) * element_bytes(d.element);
}

void check_im2col(const TensorMapDesc& d) {
  // cuTensorMapEncodeIm2col: corners fit 16 bits for NWC, 8 for NHWC, 5 for NDHWC.
  const int corner_bits = d.rank == 3 ? 16 : d.rank == 4 ? 8 : 5;
  const int corner_lo = -(1 << (corner_bits - 1)), corner_hi = (1 << (corner_bits - 1)) - 1;
  for (int i = 0; i < d.rank - 2; ++i) {
    const size_t u = size_t(i);
    check_range(indexed("pixels.lower", i), d.pixels.lower[u], corner_lo, corner_hi);
    check_range(indexed("pixels.upper", i), d.pixels.upper[u], corner_lo, corner_hi);
    if (int64_t(d.dims[u + 1]) - 1 + d.pixels.upper[u] < d.pixels.lower[u])
      refuse(indexed("pixels.upper", i),
             "leaves an empty bounding box in dimension " + std::to_string(i + 1));
  }
  check_range("pixels.channels_per_pixel", d.pixels.channels_per_pixel, 1, 256);
  check_range("pixels.pixels_per_column", d.pixels.pixels_per_column, 1, 1024);
  if (inner_bytes(d) % 16 != 0)
    refuse("pixels.channels_per_pixel",
           "= " + std::to_string(d.pixels.channels_per_pixel) + " elements is not a multiple of 16 bytes");
  // Traversal strides walk the spatial dimensions only (a strided convolution's pixels): the channel and
  // image dimensions step by 1, which is all the emulator models.
  for (int i : {0, d.rank - 1})
    if (d.element_strides[size_t(i)] != 1)
      refuse(indexed("element_strides", i),
             "must be 1 in an im2col map (traversal strides apply to the spatial dimensions)");
}

}  // namespace

size_t element_bytes(TensorElement element) {
  switch (element) {
    case TensorElement::U8:
      return 1;
    case TensorElement::U16:
    case TensorElement::F16:
    case TensorElement::BF16:
      return 2;
    case TensorElement::U32:
    case TensorElement::I32:
    case TensorElement::F32:
      return 4;
    default:
      return 8;
  }
}

unsigned swizzle_bytes(TensorSwizzle swizzle) {
  return swizzle == TensorSwizzle::None ? 0u : lab_swizzle_row_bytes(swizzle_mode(swizzle));
}

int swizzle_mode(TensorSwizzle swizzle) {
  switch (swizzle) {
    case TensorSwizzle::B32:
      return LAB_SWIZZLE_32B;
    case TensorSwizzle::B64:
      return LAB_SWIZZLE_64B;
    case TensorSwizzle::B128:
      return LAB_SWIZZLE_128B;
    default:
      return LAB_SWIZZLE_NONE;
  }
}

void* TensorMapDesc::address() const {
  return buffer ? static_cast<char*>(buffer->get()) + offset_bytes : nullptr;
}

TensorMapDesc dense_tensor_map(TensorElement element, const DeviceBuffer& buffer,
                               const std::vector<uint64_t>& dims, const std::vector<uint32_t>& box) {
  TensorMapDesc d;
  d.element = element;
  d.rank = int(dims.size());
  d.buffer = &buffer;
  uint64_t stride = element_bytes(element);
  for (size_t i = 0; i < dims.size() && i < 5; ++i) {
    d.dims[i] = dims[i];
    if (i < box.size()) d.box[i] = box[i];
    if (i > 0) d.strides[i - 1] = stride;
    stride *= dims[i];
  }
  return d;
}

void check_tensor_map(const TensorMapDesc& d) {
  if (d.im2col)
    check_range("rank", d.rank, 3, 5);
  else
    check_range("rank", d.rank, 1, 5);
  if (!d.buffer || !d.buffer->get())
    refuse("buffer", "is not set (a tensor map needs the tensor's DeviceBuffer)");
  if (reinterpret_cast<uintptr_t>(d.address()) % 16 != 0)
    refuse("offset_bytes",
           "= " + std::to_string(d.offset_bytes) + " leaves the global address not 16-byte aligned");
  const uint64_t esize = element_bytes(d.element);
  uint64_t end = esize;  // one past the farthest byte of the tensor, from element 0
  for (int i = 0; i < d.rank; ++i) {
    const size_t u = size_t(i);
    if (d.dims[u] < 1 || d.dims[u] > (uint64_t(1) << 32))
      refuse(indexed("dims", i), "= " + std::to_string(d.dims[u]) + " is outside 1..2^32");
    const uint64_t stride = i == 0 ? esize : d.strides[u - 1];
    if (i > 0 && (stride % 16 != 0 || stride >= (uint64_t(1) << 40)))
      refuse(indexed("strides", i - 1),
             "= " + std::to_string(stride) + " is not a multiple of 16 bytes below 2^40");
    end += (d.dims[u] - 1) * stride;
    if (!d.im2col) check_range(indexed("box", i), d.box[u], 1, 256);
    check_range(indexed("element_strides", i), d.element_strides[u], 1, 8);
  }
  if (d.offset_bytes + end > d.buffer->bytes())
    refuse("dims", "reach byte " + std::to_string(d.offset_bytes + end) + " of a buffer of " +
                       std::to_string(d.buffer->bytes()) + " bytes");
  if (d.im2col)
    check_im2col(d);
  else if (inner_bytes(d) % 16 != 0)
    refuse("box[0]", "= " + std::to_string(d.box[0]) + " elements is not a multiple of 16 bytes");
  const unsigned span = swizzle_bytes(d.swizzle);
  if (span && inner_bytes(d) > span)
    refuse("swizzle", "rows are " + std::to_string(span) + " bytes, shorter than the " +
                          std::to_string(inner_bytes(d)) + " bytes of a box row");
}

TensorMap emulator_tensor_map(const TensorMapDesc& d) {
  check_tensor_map(d);
  lab_emu_tensor_map m{};
  static_assert(sizeof(m) <= sizeof(TensorMap), "the emulator's layout fits the 128 bytes of a tensor map");
  std::memcpy(m.magic, LAB_EMU_TENSOR_MAP_MAGIC, sizeof m.magic);
  m.address = reinterpret_cast<uintptr_t>(d.address());
  m.rank = static_cast<unsigned char>(d.rank);
  m.mode = d.im2col ? LAB_EMU_TMAP_IM2COL : LAB_EMU_TMAP_TILED;
  m.swizzle = static_cast<unsigned char>(swizzle_mode(d.swizzle));
  m.element_bytes = static_cast<unsigned char>(element_bytes(d.element));
  for (size_t i = 0; i < size_t(d.rank); ++i) {
    m.dims[i] = d.dims[i];
    if (i > 0) m.strides[i - 1] = d.strides[i - 1];
    m.box[i] = static_cast<unsigned short>(d.box[i]);
    m.element_strides[i] = static_cast<unsigned char>(d.element_strides[i]);
  }
  for (size_t i = 0; i < 3; ++i) {
    m.lower[i] = static_cast<short>(d.pixels.lower[i]);
    m.upper[i] = static_cast<short>(d.pixels.upper[i]);
  }
  m.channels_per_pixel = static_cast<unsigned short>(d.pixels.channels_per_pixel);
  m.pixels_per_column = static_cast<unsigned short>(d.pixels.pixels_per_column);
  TensorMap out{};
  std::memcpy(&out, &m, sizeof m);
  return out;
}

}  // namespace lab
