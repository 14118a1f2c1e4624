// The warp matrix API (nvcuda::wmma) on both backends. NVRTC takes it from CUDA's <mma.h> (the TF32 types
// and __float_to_tf32 need sm_80 or newer); the cpu emulator provides the TF32 m16n16k8 subset itself
// (nvrtc_runtime/cpu/device/lab_emu_wmma.hpp, always included there), so nothing is included for it.
#pragma once

#if !defined(LAB_CPU_EMULATOR)
#include <mma.h>
#endif
