// A YOLO26 checkpoint in memory: the state dict as float tensors, the class names and the model config.
// Loaded from an Ultralytics `.pt` (zip + restricted pickle, nothing executed) or from our `.safetensors`
// interchange file (see docs/checkpoints.md); both paths end in the same struct.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lab {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, converted to float32
  std::string stored_dtype;   // dtype as stored in the file: "F16", "F32", "BF16", "F64"
  size_t element_count() const;
};

struct Checkpoint {
  std::filesystem::path path;
  std::map<std::string, HostTensor> state_dict;  // "model.0.conv.weight", "model.0.bn.running_var", ...
  std::vector<std::string> class_names;          // index = class id; size nc
  std::string scale;                             // "n", "s", "m", "l", "x" from model.yaml, "" when absent
  int nc = 0;                                    // number of classes (model.yaml nc, else len(names))
  std::string yaml_json;                         // model.yaml as JSON text ("{}" when absent)

  bool contains(const std::string& key) const { return state_dict.count(key) != 0; }
  // The tensor, or UsageError "<file>: missing tensor '<key>'".
  const HostTensor& tensor(const std::string& key) const;
  // As above, and UsageError "<file>: tensor '<key>' has shape [..] but the config needs [..]" on mismatch.
  const HostTensor& tensor(const std::string& key, const std::vector<int64_t>& expected_shape) const;
};

// Loads `.pt` (zip magic "PK") or `.safetensors` by content, not by extension. Every malformation is a
// UsageError naming the file (and the archive member / pickle offset / key where there is one).
Checkpoint load_checkpoint(const std::filesystem::path& path);

// Writes the checkpoint as safetensors (tensors in their stored dtype, F16 stays F16; names, nc, scale and
// the yaml as __metadata__), atomically (temporary file + rename).
void save_checkpoint_safetensors(const Checkpoint& checkpoint, const std::filesystem::path& path);

}  // namespace lab
