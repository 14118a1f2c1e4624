// The cuda backend's tensor maps: a checked TensorMapDesc encoded by the driver.
#pragma once
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {

// cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col, reached through the runtime's
// cudaGetDriverEntryPointByVersion (no link to libcuda). Throws UsageError for a description that breaks a
// rule, RuntimeError when the driver refuses it anyway or lacks the entry point.
TensorMap cuda_tensor_map(const TensorMapDesc& desc);

}  // namespace lab
