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
  return t == ActivationType::f16 ? "f16" : t == ActivationType::bf16 ? "bf16" : "f32";
}

ActivationType parse_activation_type(const std::string& name) {
  if (name == "f16") return ActivationType::f16;
  if (name == "bf16") return ActivationType::bf16;
  if (name == "f32") return ActivationType::f32;
  throw UsageError("unknown activation element type '" + name + "' (valid: f16, bf16, f32)");
}

std::string activation_template_arg(ActivationType t) {
  return t == ActivationType::f16 ? "0" : t == ActivationType::bf16 ? "1" : "3";
}

int activation_bytes(ActivationType t) {
  return t == ActivationType::f32 ? 4 : 2;
}

double unit_roundoff(ActivationType t) {
  if (const std::optional<HalfType> h = half_type_of(t)) return unit_roundoff(*h);
  return 0x1p-11;
}

std::vector<unsigned char> to_activation_bytes(const std::vector<float>& values, ActivationType t) {
  std::vector<unsigned char> bytes(values.size() * size_t(activation_bytes(t)));
  if (const std::optional<HalfType> h = half_type_of(t)) {
    const std::vector<uint16_t> bits = to_half_bits(values, *h);
    std::memcpy(bytes.data(), bits.data(), bytes.size());
  } else {
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t x;
      std::memcpy(&x, &values[i], sizeof x);
      if ((x & 0x7f800000u) != 0x7f800000u) x = (x + 0x1000u) & ~0x1fffu;  // finite: nearest, ties away
      std::memcpy(&bytes[i * sizeof x], &x, sizeof x);
    }
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

}  // namespace lab
