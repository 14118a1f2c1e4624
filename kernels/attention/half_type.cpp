// The 16-bit element types by name, as the command line and scenarios spell them.
#include "attention/flash_attn2_half_op.hpp"
#include "errors.hpp"

namespace lab {

HalfType parse_half_type(const std::string& name) {
  if (name == "f16") return HalfType::f16;
  if (name == "bf16") return HalfType::bf16;
  throw UsageError("unknown 16-bit element type '" + name + "' (valid: f16, bf16)");
}

}  // namespace lab
