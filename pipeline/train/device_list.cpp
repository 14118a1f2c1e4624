// device_list (device_list.hpp).
#include "pipeline/train/device_list.hpp"

#include <algorithm>
#include <cctype>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab::train {
namespace {

constexpr int kMostDevices = 1024;

// "0,1" -> {0, 1}; UsageError for an empty or non-numeric entry.
std::vector<int> numbers(const std::string& devices, const std::string& where) {
  std::vector<int> out;
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(devices.find(',', begin), devices.size());
    const std::string item = devices.substr(begin, end - begin);
    if (item.empty() || item.size() > 4 ||
        !std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); }))
      throw UsageError(where + ": '" + printable(item) +
                       "' is not a device number (a list like 0,1, or all)");
    out.push_back(std::stoi(item));
    if (end == devices.size()) return out;
    begin = end + 1;
  }
}

}  // namespace

std::vector<int> device_list(const std::string& devices, const std::string& backend, int cuda_devices) {
  if (devices.empty()) return {};
  const std::string where = "--devices " + printable(devices);
  if (backend == "reference")
    throw UsageError(where + ": the reference backend trains on one rank, the host");
  std::vector<int> list;
  if (devices == "all") {
    if (backend != "cuda" || cuda_devices < 1)
      throw UsageError(where + ": every CUDA GPU, but --backend " + backend +
                       " has none (the cpu emulator's ranks are listed: --devices 0,1)");
    for (int d = 0; d < std::min(cuda_devices, kMostDevices); ++d) list.push_back(d);
    return list;
  }
  list = numbers(devices, where);
  for (size_t i = 0; i < list.size(); ++i) {
    if (std::find(list.begin(), list.begin() + long(i), list[i]) != list.begin() + long(i))
      throw UsageError(where + ": device " + std::to_string(list[i]) + " is listed twice");
    if (backend == "cuda" && list[i] >= cuda_devices)
      throw UsageError(where + ": no CUDA device " + std::to_string(list[i]) + " (this machine has " +
                       std::to_string(cuda_devices) + ")");
    if (backend == "cpu" && list[i] >= int(list.size()))
      throw UsageError(where + ": the cpu emulator's " + std::to_string(list.size()) +
                       " rank(s) are devices 0.." + std::to_string(list.size() - 1));
  }
  return list;
}

}  // namespace lab::train
