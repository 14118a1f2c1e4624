// The precision policy table (docs/detect.md, "Precision", has the measurements behind each row).
#include "pipeline/executor/precision_policy.hpp"

#include "kernels/attention/psa_op.hpp"

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

// At fp16 / bf16 the two Flash Attention passes, forward and backward, run on 16-bit tensor cores with float
// accumulation (PsaOp's mma_fp16 / mma_bf16), as PyTorch's autocast runs attention in a 16-bit training step:
// the float32 tiled passes took 1.28 ms of an H100 fp16 iteration's launches alone, and the change took the
// iteration from 21.97 to 21.13 ms (docs/PERFORMANCE.md, thirty-sixth entry). float32 (tiled) at fp32 and
// tf32, and where flash_attn2_mma.cu has no kernel for the key width.
const char* training_attention_variant(Precision network, int key_dim) {
  if (!psa_half_problem(key_dim).empty()) return "tiled";
  if (network == Precision::Fp16) return "mma_fp16";
  if (network == Precision::Bf16) return "mma_bf16";
  return "tiled";
}

}  // namespace lab
