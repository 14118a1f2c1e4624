// Checkpoint entry points: load by content (zip -> .pt loader, safetensors header -> safetensors loader),
// tensor lookups with shape checks, and the helpers both loaders share.
#include "pipeline/checkpoint/checkpoint.hpp"

#include <cstdio>
#include <cstring>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/checkpoint/checkpoint_detail.hpp"
#include "pipeline/checkpoint/half_float.hpp"
#include "pipeline/checkpoint/safetensors_checkpoint.hpp"
#include "pipeline/checkpoint/torch_checkpoint.hpp"
#include "pipeline/safetensors.hpp"

namespace lab {

size_t HostTensor::element_count() const {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  return count;
}

const HostTensor& Checkpoint::tensor(const std::string& key) const {
  auto it = state_dict.find(key);
  if (it == state_dict.end()) throw UsageError(path.string() + ": missing tensor '" + key + "'");
  return it->second;
}

const HostTensor& Checkpoint::tensor(const std::string& key,
                                     const std::vector<int64_t>& expected_shape) const {
  const HostTensor& found = tensor(key);
  if (found.shape != expected_shape)
    throw UsageError(path.string() + ": tensor '" + key + "' has shape " + shape_text(found.shape) +
                     " but the config needs " + shape_text(expected_shape));
  return found;
}

namespace {

constexpr size_t kMaxCheckpointMessage = 300;  // bytes of an error line about a checkpoint

Checkpoint load_by_content(const std::filesystem::path& path) {
  const std::string head = read_input_prefix(path, 9, "checkpoint");
  if (head.size() >= 4 && head[0] == 'P' && head[1] == 'K') return load_torch_checkpoint(path);
  // Safetensors: an 8-byte header length, then the JSON header, which starts with '{'.
  if (head.size() == 9 && head[8] == '{') return load_safetensors_checkpoint(path);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80)
    throw UsageError(printable_path(path) +
                     ": a legacy (pre-zip) torch.save file; re-save it with a current torch");
  throw UsageError(printable_path(path) +
                   ": not a checkpoint (neither a torch .pt zip nor a safetensors file)");
}

}  // namespace

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  try {
    return load_by_content(path);
  } catch (const UsageError& e) {
    // Names, keys and class names inside a checkpoint are untrusted: one short, escaped line.
    throw UsageError(printable(e.what(), kMaxCheckpointMessage));
  }
}

int class_count_from_head(const std::map<std::string, HostTensor>& state_dict) {
  // Keys "model.<i>.cv3.0.<j>.weight" / "model.<i>.one2one_cv3.0.<j>.weight": take the highest i, then j.
  int best_layer = -1, best_index = -1, nc = 0;
  for (const auto& [key, tensor] : state_dict) {
    int layer = 0, index = 0, consumed = 0;
    char head[16] = {};
    if (std::sscanf(key.c_str(), "model.%d.%15[a-z0-9_].0.%d.weight%n", &layer, head, &index, &consumed) !=
            3 ||
        static_cast<size_t>(consumed) != key.size())
      continue;
    if (std::string(head) != "cv3" && std::string(head) != "one2one_cv3") continue;
    if (tensor.shape.size() != 4 || tensor.shape[0] <= 0 || tensor.shape[0] > kMaxClasses) continue;
    if (layer > best_layer || (layer == best_layer && index > best_index)) {
      best_layer = layer;
      best_index = index;
      nc = static_cast<int>(tensor.shape[0]);
    }
  }
  return nc;
}

std::vector<std::string> default_class_names(int nc) {
  std::vector<std::string> names;
  for (int i = 0; i < nc; ++i) names.push_back("class" + std::to_string(i));
  return names;
}

std::vector<uint8_t> stored_bytes(const HostTensor& tensor, const std::string& key,
                                  const std::filesystem::path& path) {
  if (tensor.values.size() != tensor.element_count())
    throw UsageError(path.string() + ": tensor '" + key + "' has " + std::to_string(tensor.values.size()) +
                     " values for shape " + shape_text(tensor.shape));
  const std::vector<float>& v = tensor.values;
  std::vector<uint8_t> bytes;
  auto put = [&bytes](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  };
  if (tensor.stored_dtype == "F32") {
    bytes.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  } else if (tensor.stored_dtype == "F16" || tensor.stored_dtype == "BF16") {
    bytes.reserve(v.size() * 2);
    const bool half = tensor.stored_dtype == "F16";
    for (float x : v) {
      const uint16_t bits = half ? float_to_half_bits(x) : float_to_bf16_bits(x);
      put(&bits, 2);
    }
  } else if (tensor.stored_dtype == "F64") {
    bytes.reserve(v.size() * 8);
    for (float x : v) {
      const double wide = x;
      put(&wide, 8);
    }
  } else {
    throw UsageError(path.string() + ": tensor '" + key + "' has stored dtype '" + tensor.stored_dtype +
                     "' (expected F16, F32, BF16 or F64)");
  }
  return bytes;
}

}  // namespace lab
