// `lab train --devices`: which devices the ranks of a data-parallel run train on. "" (the default): one rank
// on the backend's default device; "0,1": one rank per listed device; "all": every CUDA GPU. With --backend
// cpu the list names emulated ranks, each its own cpu backend, numbered 0..n-1 (what CI runs).
#pragma once
#include <string>
#include <vector>

namespace lab::train {

// The ranks' device ordinals in rank order (empty for ""). `cuda_devices`: the GPUs this machine has.
// One-line UsageError naming --devices for a malformed list, a device listed twice, a CUDA device that does
// not exist, "all" without CUDA, a cpu rank outside 0..n-1, or any list on the reference backend.
std::vector<int> device_list(const std::string& devices, const std::string& backend, int cuda_devices);

}  // namespace lab::train
