// The --layout option of `lab detect`, `lab val` and `lab bench pipeline`: auto (default), nchw or nhwc
// (pipeline/executor/activation_layout.hpp).
#pragma once

namespace lab {

inline constexpr const char* kLayoutHelp =
    "Activations between layers on a kernel backend: nchw (float32, every GPU), nhwc (fp16 / bf16, or float "
    "at tf32 and fp32 (3xTF32), on Hopper's wgmma + TMA kernels, sm_90a, or the cpu emulator) or auto (nhwc "
    "where it runs, fp32 only on a GPU; else nchw)";

}  // namespace lab
