// The tensor map a kernel receives inside its parameter struct: 128 opaque bytes, 64-byte aligned, made on
// the host by Backend::tensor_map (nvrtc_runtime/tensor_map.hpp). On cuda they are the driver's CUtensorMap;
// on the cpu emulator the same description in the emulator's own layout (cpu/device/lab_emu_tensor_map.hpp).
// Kernels take the parameter struct as `const __grid_constant__` so the map stays in parameter space and its
// address can be handed to the TMA instructions of common/lab_tma.cuh.
#pragma once

namespace lab {

struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

}  // namespace lab
