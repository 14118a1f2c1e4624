// The NHWC network's activation element types on the host (activation_type.hpp).
#include "kernels/common/activation_type.hpp"

#include <cstring>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

ActivationType activation_type(HalfType t) {
  return t == HalfType::f16 ? ActivationType::f16 : ActivationType::bf16;
}

std::optional<HalfType> half_type_of(ActivationType t) {
  if (t == ActivationType::f16) return HalfType::f16;
  if (t == ActivationType::bf16) return HalfType::bf16;
  return std::nullopt;
}

std::string activation_type_name(ActivationType t) {
  switch (t) {
    case ActivationType::f16:
      return "f16";
    case ActivationType::bf16:
      return "bf16";
    case ActivationType::tf32:
      return "tf32";
    case ActivationType::f32:
      return "f32";
  }
  return "";
}

ActivationType parse_activation_type(const std::string& name) {
  if (name == "f16") return ActivationType::f16;
  if (name == "bf16") return ActivationType::bf16;
  if (name == "tf32") return ActivationType::tf32;
  if (name == "f32") return ActivationType::f32;
  throw UsageError("unknown activation element type '" + name + "' (valid: f16, bf16, tf32, f32)");
}

std::string activation_template_arg(ActivationType t) {
  switch (t) {
    case ActivationType::f16:
      return "0";
    case ActivationType::bf16:
      return "1";
    case ActivationType::tf32:
      return "3";
    case ActivationType::f32:
      return "4";
  }
  return "";
}

int activation_bytes(ActivationType t) {
  return half_type_of(t) ? 2 : 4;
}

double unit_roundoff(ActivationType t) {
  if (const std::optional<HalfType> h = half_type_of(t)) return unit_roundoff(*h);
  return t == ActivationType::tf32 ? 0x1p-11 : 0x1p-24;
}

std::vector<unsigned char> to_activation_bytes(const std::vector<float>& values, ActivationType t) {
  std::vector<unsigned char> bytes(values.size() * size_t(activation_bytes(t)));
  if (const std::optional<HalfType> h = half_type_of(t)) {
    const std::vector<uint16_t> bits = to_half_bits(values, *h);
    std::memcpy(bytes.data(), bits.data(), bytes.size());
  } else if (t == ActivationType::tf32) {
    for (size_t i = 0; i < values.size(); ++i) {
      float hi, lo;
      split_tf32(values[i], hi, lo);
      std::memcpy(&bytes[i * sizeof hi], &hi, sizeof hi);
    }
  } else {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  }
  return bytes;
}

std::vector<float> activation_bytes_to_float(const std::vector<unsigned char>& bytes, ActivationType t) {
  const size_t n = bytes.size() / size_t(activation_bytes(t));
  if (const std::optional<HalfType> h = half_type_of(t)) {
    std::vector<uint16_t> bits(n);
    std::memcpy(bits.data(), bytes.data(), n * sizeof(uint16_t));
    return half_bits_to_float(bits, *h);
  }
  std::vector<float> values(n);
  std::memcpy(values.data(), bytes.data(), n * sizeof(float));
  return values;
}

void split_tf32(float x, float& hi, float& lo) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & ~0x1fffu;  // finite: nearest, ties away
  std::memcpy(&hi, &bits, sizeof bits);
  lo = x - hi;
}

}  // namespace lab
