// Tensor maps on cuda: the driver's encoders, found once through the runtime's driver entry point.
#include "nvrtc_runtime/cuda_tensor_map.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

// The driver version whose signatures of both encoders cudaTypedefs.h names _v12000.
constexpr unsigned kEncoderVersion = 12000;

template <class Fn>
Fn driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &fn, kEncoderVersion, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
    cudaGetLastError();
    throw RuntimeError(std::string("the CUDA driver has no ") + symbol +
                       " (tensor maps need a driver of CUDA 12 or newer)");
  }
  return reinterpret_cast<Fn>(fn);
}

// The description's enums are numbered as the driver's.
static_assert(int(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) == int(TensorElement::BF16) &&
              int(CU_TENSOR_MAP_DATA_TYPE_FLOAT32) == int(TensorElement::F32) &&
              int(CU_TENSOR_MAP_DATA_TYPE_UINT8) == int(TensorElement::U8));
static_assert(int(CU_TENSOR_MAP_SWIZZLE_128B) == int(TensorSwizzle::B128) &&
              int(CU_TENSOR_MAP_SWIZZLE_32B) == int(TensorSwizzle::B32));
static_assert(int(CU_TENSOR_MAP_L2_PROMOTION_L2_256B) == int(TensorL2Promotion::B256) &&
              int(CU_TENSOR_MAP_L2_PROMOTION_L2_64B) == int(TensorL2Promotion::B64));

}  // namespace

TensorMap cuda_tensor_map(const TensorMapDesc& d) {
  check_tensor_map(d);
  // The driver wants the map 64-byte aligned where the kernel reads it; the header's type asks 128 for
  // itself.
  static_assert(sizeof(CUtensorMap) == sizeof(TensorMap), "lab::TensorMap holds a CUtensorMap");
  cuuint64_t dims[5] = {}, strides[4] = {};
  cuuint32_t box[5] = {}, element_strides[5] = {};
  for (size_t i = 0; i < size_t(d.rank); ++i) {
    dims[i] = d.dims[i];
    if (i > 0) strides[i - 1] = d.strides[i - 1];
    box[i] = d.box[i];
    element_strides[i] = d.element_strides[i];
  }
  CUtensorMap map{};
  CUresult r;
  const char* encoder;
  if (d.im2col) {
    static const auto encode = driver_entry<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
    encoder = "cuTensorMapEncodeIm2col";
    r = encode(&map, CUtensorMapDataType(d.element), cuuint32_t(d.rank), d.address(), dims, strides,
               d.pixels.lower.data(), d.pixels.upper.data(), d.pixels.channels_per_pixel,
               d.pixels.pixels_per_column, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CUtensorMapSwizzle(d.swizzle), CUtensorMapL2promotion(d.l2_promotion),
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    static const auto encode = driver_entry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
    encoder = "cuTensorMapEncodeTiled";
    r = encode(&map, CUtensorMapDataType(d.element), cuuint32_t(d.rank), d.address(), dims, strides, box,
               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CUtensorMapSwizzle(d.swizzle),
               CUtensorMapL2promotion(d.l2_promotion), CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  if (r != CUDA_SUCCESS)
    throw RuntimeError(std::string("tensor map: ") + encoder + " refused the description (CUresult " +
                       std::to_string(int(r)) + ")");
  TensorMap out;
  std::memcpy(&out, &map, sizeof map);
  return out;
}

}  // namespace lab
