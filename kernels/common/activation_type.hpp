// The element types of the NHWC network's activations on the host:
//   f16, bf16  16-bit storage, 16-bit tensor-core products (the `--precision fp16 / bf16` networks);
//   tf32       float storage of tf32 values, tf32 tensor-core products (`--precision tf32`;
//              nn/nhwc_element.cuh says why the stored values are tf32);
//   f32        float storage, 3xTF32 products (float32 accuracy: `--precision fp32` on the NHWC layout).
// Their names, the DT template argument the NHWC kernels take (LAB_F16 / LAB_BF16 of common/lab_mma.cuh,
// LAB_F32 of common/lab_wgmma.cuh, LAB_F32X3 of nn/nhwc_element.cuh), their size, and host conversions to and
// from the stored bytes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/half_type.hpp"

namespace lab {

enum class ActivationType { f16, bf16, tf32, f32 };

ActivationType activation_type(HalfType t);
// The 16-bit type of fp16 / bf16; nothing for the float types.
std::optional<HalfType> half_type_of(ActivationType t);
// "f16", "bf16", "tf32", "f32"; parse throws UsageError naming the valid values.
std::string activation_type_name(ActivationType t);
ActivationType parse_activation_type(const std::string& name);
// The kernels' DT template argument: "0" (LAB_F16), "1" (LAB_BF16), "3" (LAB_F32) or "4" (LAB_F32X3).
std::string activation_template_arg(ActivationType t);
// Bytes of one element: 2 or 4.
int activation_bytes(ActivationType t);
// Half an ulp of a stored value, relative to it: 2^-11 (fp16, and tf32 values), 2^-8 (bf16), 2^-24 (f32).
double unit_roundoff(ActivationType t);

// Each value stored as type `t` (fp16 / bf16 rounded to nearest even, tf32 to nearest tf32 with ties away
// from zero, as the kernels' lab_to_tf32, f32 as is), as raw bytes.
std::vector<unsigned char> to_activation_bytes(const std::vector<float>& values, ActivationType t);
// The values of raw bytes of type `t`, exact in float (NaN patterns stay NaN).
std::vector<float> activation_bytes_to_float(const std::vector<unsigned char>& bytes, ActivationType t);
// x split for 3xTF32 as the f32 kernels multiply it: hi = x rounded to nearest tf32, lo = x - hi (exact).
void split_tf32(float x, float& hi, float& lo);

}  // namespace lab
