// The activation layout of the kernel network: float32 NCHW between layers (every precision, every GPU), or
// NHWC end to end (fp16 / bf16 activations, or float ones with tf32 products, on Hopper's wgmma + TMA
// kernels: conv2d_nhwc and its neighbours). `auto` takes NHWC where the network precision is fp16, bf16 or
// tf32 and the backend runs sm_90a kernels (the cuda
// backend on a compute capability 9.0 GPU; the cpu emulator, which models wgmma / TMA / mbarrier, so CI runs
// the same kernel sources) and the model's channel slices start at multiples of 8 channels (16-byte NHWC
// rows); bf16 also needs the float stem (conv2d_stem_nhwc runs layer 0; activation_layout.cpp says why). Else
// NCHW. docs/detect.md, "Activation layout".
#pragma once
#include <string>

#include "kernels/nn/precision.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

class Backend;

enum class ActivationLayout { Nchw, Nhwc };
enum class LayoutChoice { Auto, Nchw, Nhwc };  // --layout auto|nchw|nhwc

std::string layout_name(ActivationLayout layout);  // "nchw" / "nhwc"
// The choice named by `value`; UsageError "--layout x: unknown (valid: auto, nchw, nhwc)" otherwise.
LayoutChoice parse_layout_choice(const std::string& value);

// Empty when the NHWC network runs `model` (at any precision) on `backend`, else why not (one line).
std::string nhwc_problem(const Yolo26Model& model, const Backend& backend);
// The layout `choice` runs: auto as above; nhwc where nhwc_problem says nothing, else UsageError
// "--layout nhwc: <problem>".
ActivationLayout choose_layout(LayoutChoice choice, const Yolo26Model& model, Precision precision,
                               const Backend& backend);

}  // namespace lab
