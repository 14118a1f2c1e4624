// fp16 / bf16 on the host: names, template arguments, and conversions through cuda_fp16.h and cuda_bf16.h.
#include "kernels/common/half_type.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

HalfType parse_half_type(const std::string& name) {
  if (name == "f16") return HalfType::f16;
  if (name == "bf16") return HalfType::bf16;
  throw UsageError("unknown 16-bit element type '" + name + "' (valid: f16, bf16)");
}

double unit_roundoff(HalfType t) {
  return t == HalfType::f16 ? 0x1p-11 : 0x1p-8;
}

std::string half_type_template_arg(HalfType t) {
  return t == HalfType::f16 ? "0" : "1";
}

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
