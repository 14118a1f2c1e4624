// The element type of the NHWC kernels' activations, by their DT template argument: LAB_F16 / LAB_BF16
// (16-bit storage), LAB_F32 (float storage of tf32 values, which the tensor cores read as tf32) or LAB_F32X3
// (float storage, 3xTF32 products: float32 accuracy). A group of 8 channels is one 16-byte vector in 16 bits
// and two in float; arithmetic is in float either way, and a store rounds once: to nearest even in 16 bits,
// to nearest tf32 (10 fraction bits, ties away: lab_to_tf32) for LAB_F32, not at all for LAB_F32X3. Why tf32
// values in float: wgmma drops the low 13 fraction bits of a float operand (truncation,
// tests/test_emulator_wgmma_tf32.cpp), a bias of half a tf32 unit per operand that compounds over the
// network's convs (measured on the cpu emulator, yolo26n at 64x96: worst tensor rel_l2 2.0e-2 with raw
// floats, against 1.1e-3 with fp16 storage); a value already in tf32 loses nothing there.
#pragma once
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_wgmma.cuh"

// Float storage multiplied in 3xTF32 (after LAB_F32 3 of lab_wgmma.cuh).
#define LAB_F32X3 4

namespace nn {

template <int DT>
struct NhwcElement {
  using type = uint16_t;
};
template <>
struct NhwcElement<LAB_F32> {
  using type = float;
};
template <>
struct NhwcElement<LAB_F32X3> {
  using type = float;
};

// A value as an element of type DT would store it, as a float: rounded to tf32 for LAB_F32, unchanged for
// LAB_F32X3 (the 16-bit types go through lab_pack2).
template <int DT>
__device__ __forceinline__ float nhwc_float_store_value(float v) {
  if constexpr (DT == LAB_F32)
    return __uint_as_float(lab_to_tf32(v));
  else
    return v;
}
template <int DT>
using nhwc_t = typename NhwcElement<DT>::type;

// One element as float, and a float stored as one element.
template <int DT>
__device__ __forceinline__ float nhwc_load1(const nhwc_t<DT>* p) {
  if constexpr (DT == LAB_F32 || DT == LAB_F32X3)
    return *p;
  else
    return lab_to_float<DT>(*p);
}
template <int DT>
__device__ __forceinline__ void nhwc_store1(nhwc_t<DT>* p, float v) {
  if constexpr (DT == LAB_F32 || DT == LAB_F32X3)
    *p = nhwc_float_store_value<DT>(v);
  else
    *p = uint16_t(lab_pack2<DT>(v, 0.f) & 0xffffu);
}

// Eight consecutive channels (p 16-byte aligned in 16 bits, 32-byte aligned in float) as floats.
template <int DT>
__device__ __forceinline__ void nhwc_load8(const nhwc_t<DT>* p, float (&v)[8]) {
  if constexpr (DT == LAB_F32 || DT == LAB_F32X3) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = lab_to_float<DT>(uint16_t(words[i] & 0xffffu));
      v[2 * i + 1] = lab_to_float<DT>(uint16_t(words[i] >> 16));
    }
  }
}

// Eight floats stored as eight consecutive channels (alignment as nhwc_load8).
template <int DT>
__device__ __forceinline__ void nhwc_store8(nhwc_t<DT>* p, const float (&v)[8]) {
  if constexpr (DT == LAB_F32 || DT == LAB_F32X3) {
    float r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = nhwc_float_store_value<DT>(v[i]);
    reinterpret_cast<float4*>(p)[0] = make_float4(r[0], r[1], r[2], r[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(r[4], r[5], r[6], r[7]);
  } else {
    uint4 packed;
    packed.x = lab_pack2<DT>(v[0], v[1]), packed.y = lab_pack2<DT>(v[2], v[3]);
    packed.z = lab_pack2<DT>(v[4], v[5]), packed.w = lab_pack2<DT>(v[6], v[7]);
    *reinterpret_cast<uint4*>(p) = packed;
  }
}

}  // namespace nn
