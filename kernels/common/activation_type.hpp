// The element types of the NHWC network's activations on the host: fp16 and bf16 (16-bit storage, 16-bit
// tensor-core products) and f32 (float storage of tf32 values, tf32 tensor-core products: the `--precision
// tf32` network; nn/nhwc_element.cuh says why the stored values are tf32).
// Their names, the DT template argument the NHWC kernels take (LAB_F16 / LAB_BF16 of common/lab_mma.cuh,
// LAB_F32 of common/lab_wgmma.cuh), their size, and host conversions to and from the stored bytes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/half_type.hpp"

namespace lab {

enum class ActivationType { f16, bf16, f32 };

ActivationType activation_type(HalfType t);
// The 16-bit type of fp16 / bf16; nothing for f32.
std::optional<HalfType> half_type_of(ActivationType t);
// "f16", "bf16", "f32"; parse throws UsageError naming the valid values.
std::string activation_type_name(ActivationType t);
ActivationType parse_activation_type(const std::string& name);
// The kernels' DT template argument: "0" (LAB_F16), "1" (LAB_BF16) or "3" (LAB_F32).
std::string activation_template_arg(ActivationType t);
// Bytes of one element: 2 or 4.
int activation_bytes(ActivationType t);
// Half an ulp of a stored value, relative to it: 2^-11 (fp16, and f32's tf32 values), 2^-8 (bf16).
double unit_roundoff(ActivationType t);

// Each value stored as type `t` (fp16 / bf16 rounded to nearest even, f32 to nearest tf32 with ties away
// from zero, as the kernels' lab_to_tf32), as raw bytes.
std::vector<unsigned char> to_activation_bytes(const std::vector<float>& values, ActivationType t);
// The values of raw bytes of type `t`, exact in float (NaN patterns stay NaN).
std::vector<float> activation_bytes_to_float(const std::vector<unsigned char>& bytes, ActivationType t);

}  // namespace lab
