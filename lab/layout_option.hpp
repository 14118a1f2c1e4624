// The --layout option of `lab detect`, `lab val` and `lab bench pipeline`: auto (default), nchw or nhwc
// (pipeline/executor/activation_layout.hpp).
#pragma once

namespace lab {

inline constexpr const char* kLayoutHelp =
    "Activations between layers on a kernel backend: nchw (float32, every GPU), nhwc (fp16 / bf16, or tf32 "
    "values in float at tf32, on Hopper's wgmma + TMA kernels, sm_90a, or the cpu emulator) or auto (nhwc "
    "where it runs, else nchw)";

}  // namespace lab
