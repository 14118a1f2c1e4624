// The options and the JSON output `lab detect` and `lab val` share.
#include "lab/network_options.hpp"

#include <iostream>

#include "lab/option_checks.hpp"
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
