// The precision policy table (docs/detect.md, "Precision", has the measurements behind each row).
#include "pipeline/executor/precision_policy.hpp"

namespace lab {
namespace {

struct PolicyRow {
  ConvRole role;
  Precision network, conv;
};

// Rows that differ from "every conv at the network precision":
constexpr PolicyRow kPolicy[] = {
    // bf16 keeps 8 significant bits, about the resolution of the 8-bit image itself, so a stem conv on bf16
    // operands blurs the pixels every later layer builds on. Measured on the cpu emulator (zidane.jpg, 640x640
    // square, against the float64 reference): with it the network reported the left person twice (0.48 and
    // 0.35 where fp32 reports 0.92; the H200 showed the same); the stem in float32 alone brings back one person
    // at 0.91, while the head's convs or the attention convs in float32 or fp16 did not. It is the cheapest
    // conv of the network (3 -> 16 channels). fp16 and tf32 keep 11 significant bits: the image survives.
    {ConvRole::Stem, Precision::Bf16, Precision::Fp32},
};

}  // namespace

Precision conv_precision(ConvRole role, Precision network) {
  for (const PolicyRow& row : kPolicy)
    if (row.role == role && row.network == network) return row.conv;
  return network;
}

}  // namespace lab
