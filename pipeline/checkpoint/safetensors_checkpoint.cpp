// The safetensors side of checkpoints: load (ours or a foreign state dict) and the atomic save.
#include "pipeline/checkpoint/safetensors_checkpoint.hpp"

#include <charconv>
#include <cstring>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint_detail.hpp"
#include "pipeline/safetensors.hpp"

namespace lab {
namespace {

bool is_float_dtype(const std::string& dtype) {
  return dtype == "F16" || dtype == "F32" || dtype == "BF16" || dtype == "F64";
}

int parse_class_count(const std::string& text, const std::string& file) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0 || value > kMaxClasses)
    throw UsageError(file + ": __metadata__ nc '" + printable(text, 40) + "' is not a class count in 1.." +
                     std::to_string(kMaxClasses));
  return value;
}

std::vector<std::string> parse_names(const std::string& text, const std::string& file) {
  nlohmann::json names;
  try {
    names = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw UsageError(file + ": __metadata__ names is not JSON");
  }
  if (!names.is_array()) throw UsageError(file + ": __metadata__ names is not a JSON list");
  std::vector<std::string> result;
  for (const auto& name : names) {
    if (!name.is_string()) throw UsageError(file + ": __metadata__ names holds a non-string entry");
    result.push_back(name.get<std::string>());
  }
  return result;
}

}  // namespace

Checkpoint load_safetensors_checkpoint(const std::filesystem::path& path) {
  const std::string file = printable_path(path);
  const SafetensorsFile st = SafetensorsFile::load(path);
  Checkpoint checkpoint;
  checkpoint.path = path;
  for (const std::string& key : st.keys()) {
    const SafetensorsTensorInfo& info = st.info(key);
    if (!is_float_dtype(info.dtype)) continue;
    checkpoint.state_dict[key] = HostTensor{info.shape, st.floats(key), info.dtype};
  }
  if (checkpoint.state_dict.empty()) throw UsageError(file + ": no floating-point state-dict tensors");

  const auto& metadata = st.metadata();
  auto entry = [&metadata](const char* name) -> const std::string* {
    auto it = metadata.find(name);
    return it == metadata.end() ? nullptr : &it->second;
  };
  const std::string* format = entry("format");
  if (format != nullptr && *format == kCheckpointFormatTag) {
    for (const char* required : {"names", "nc", "scale", "yaml"})
      if (entry(required) == nullptr)
        throw UsageError(file + ": __metadata__ lacks '" + required + "' (required by format " +
                         kCheckpointFormatTag + ")");
    checkpoint.class_names = parse_names(*entry("names"), file);
    checkpoint.nc = parse_class_count(*entry("nc"), file);
    checkpoint.scale = *entry("scale");
    if (!nlohmann::json::accept(*entry("yaml"))) throw UsageError(file + ": __metadata__ yaml is not JSON");
    checkpoint.yaml_json = *entry("yaml");
    if (static_cast<int>(checkpoint.class_names.size()) != checkpoint.nc)
      throw UsageError(file + ": __metadata__ names has " + std::to_string(checkpoint.class_names.size()) +
                       " entries but nc is " + std::to_string(checkpoint.nc));
    return checkpoint;
  }

  checkpoint.yaml_json = "{}";
  checkpoint.nc = class_count_from_head(checkpoint.state_dict);
  if (checkpoint.nc == 0 && entry("nc") != nullptr) checkpoint.nc = parse_class_count(*entry("nc"), file);
  if (checkpoint.nc == 0)
    throw UsageError(file + ": cannot tell the number of classes (no Detect head tensor and no nc metadata)");
  checkpoint.class_names = default_class_names(checkpoint.nc);
  return checkpoint;
}

void save_checkpoint_safetensors(const Checkpoint& checkpoint, const std::filesystem::path& path) {
  std::vector<SafetensorsTensor> tensors;
  tensors.reserve(checkpoint.state_dict.size());
  for (const auto& [key, tensor] : checkpoint.state_dict)
    tensors.push_back({key, tensor.stored_dtype, tensor.shape, stored_bytes(tensor, key, path)});
  const std::map<std::string, std::string> metadata = {
      {"format", kCheckpointFormatTag},
      {"names",
       nlohmann::json(checkpoint.class_names).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)},
      {"nc", std::to_string(checkpoint.nc)},
      {"scale", checkpoint.scale},
      {"yaml", checkpoint.yaml_json.empty() ? "{}" : checkpoint.yaml_json}};

  write_file_atomically(
      path, [&](const std::filesystem::path& temporary) { write_safetensors(temporary, tensors, metadata); });
}

}  // namespace lab
