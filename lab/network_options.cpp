// The options and the JSON output `lab detect` and `lab val` share.
#include "lab/network_options.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "lab/option_checks.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/atomic_file.hpp"

namespace lab {

void add_model_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--model", value,
                  "Checkpoint (.pt or .safetensors); default: $LAB_MODEL, the shared assets, the user cache, "
                  "else a download of the official yolo26n.pt")
      ->check(not_empty());
}

void add_executor_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--backend", value,
                  "auto (cuda when a GPU is present, else reference), cuda or cpu (our kernels), reference "
                  "(the plain C++ forward)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "reference"}))
      ->capture_default_str();
}

void add_devices_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--devices", value,
                  "GPUs that share the batches: comma-separated ordinals or 'all' (cuda); with cpu or "
                  "reference each entry adds a forward worker")
      ->capture_default_str();
}

std::vector<int> parse_devices(const std::string& text, const std::string& executor) {
  if (text == "all") {
    if (executor != "cuda") return {0};
    std::vector<int> all{0};  // without a GPU the Detector reports that no device is available
    for (int i = 1; i < cuda_device_count(); ++i) all.push_back(i);
    return all;
  }
  const UsageError malformed("--devices " + text + ": expected 'all' or GPU ordinals like 0,1");
  if (text.empty() || text.back() == ',') throw malformed;
  std::vector<int> devices;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    size_t used = 0;
    int ordinal = -1;
    try {
      ordinal = std::stoi(item, &used);
    } catch (const std::exception&) {
    }
    if (item.empty() || used != item.size() || ordinal < 0) throw malformed;
    if (std::find(devices.begin(), devices.end(), ordinal) != devices.end())
      throw UsageError("--devices " + text + ": device " + item + " is named twice");
    devices.push_back(ordinal);
  }
  if (devices.empty()) throw malformed;
  return devices;
}

std::string resolve_executor(const std::string& requested, Precision precision, std::string& note) {
  if (requested != "auto") return requested;
  if (cuda_device_present()) {
    note = " (auto: a CUDA device is present)";
    return "cuda";
  }
  if (precision != Precision::Fp32) {
    note = " (auto: no CUDA device, and --precision " + precision_name(precision) + " needs our kernels)";
    return "cpu";
  }
  note = " (auto: no CUDA device, so the CPU reference)";
  return "reference";
}

void write_json_output(const std::string& target, const std::string& document, std::ostream& human) {
  if (target == "-") {
    std::cout << document << std::flush;
    return;
  }
  write_file_atomically(target, document);
  human << "JSON written to " << target << "\n";
}

}  // namespace lab
