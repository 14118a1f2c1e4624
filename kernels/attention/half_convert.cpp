// float <-> fp16 / bf16 bit patterns on the host, by cuda_fp16.h and cuda_bf16.h.
#include "attention/half_convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lab {

std::vector<uint16_t> to_half_bits(const std::vector<float>& values, HalfType t) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = t == HalfType::f16 ? __half_as_ushort(__float2half_rn(values[i]))
                                 : __bfloat16_as_ushort(__float2bfloat16_rn(values[i]));
  return bits;
}

std::vector<float> half_bits_to_float(const std::vector<uint16_t>& bits, HalfType t) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    values[i] = t == HalfType::f16 ? __half2float(__ushort_as_half(bits[i]))
                                   : __bfloat162float(__ushort_as_bfloat16(bits[i]));
  return values;
}

}  // namespace lab
