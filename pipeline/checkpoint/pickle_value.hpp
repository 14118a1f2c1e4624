// The values a restricted pickle builds: plain data (None, bool, int, float, str, bytes, tuple, list, dict,
// set), references to allowed globals, generic objects recorded from REDUCE/NEWOBJ/BUILD without running
// anything, torch storage references (persistent ids) and tensor views on them. Values live in the
// PickleDocument that parsed them and point at each other (memo references share values).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lab {

enum class PickleKind {
  None,
  Bool,
  Int,
  BigInt,  // an integer wider than 64 bits (kept as raw little-endian bytes, never interpreted)
  Float,
  String,
  Bytes,
  Tuple,
  List,
  Dict,
  Set,
  Global,   // a reference to an allowed class or function ("module.name")
  Object,   // an instance of an allowed class: class name, constructor args, BUILD state
  Storage,  // a torch storage: the persistent id ('storage', type, key, location, numel)
  Tensor,   // a strided view of a storage (torch._utils._rebuild_tensor_v2)
};

// What an allowed global is, so REDUCE / NEWOBJ know what to build.
enum class GlobalRole { Dict, Set, RebuildTensor, RebuildParameter, StorageType, DType, GenericClass };

struct PickleValue;

struct PickleStorage {
  std::string
      dtype;  // safetensors dtype name: "F16", "F32", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  size_t element_bytes = 0;
  std::string key;  // archive member <prefix>/data/<key>
  std::string location;
  int64_t numel = 0;
};

struct PickleTensor {
  const PickleValue* storage = nullptr;  // kind Storage
  int64_t storage_offset = 0;            // in elements
  std::vector<int64_t> size, stride;     // in elements
};

struct PickleValue {
  PickleKind kind = PickleKind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  GlobalRole role = GlobalRole::GenericClass;  // Global only
  std::string text;                 // String/Bytes contents; Global/Object: "module.name"; BigInt: raw bytes
  std::vector<PickleValue*> items;  // Tuple/List/Set elements; Object: args
  std::vector<std::pair<PickleValue*, PickleValue*>> entries;  // Dict, insertion order
  PickleValue* state = nullptr;                                // Object/Dict: the BUILD state
  std::unique_ptr<PickleStorage> storage;                      // Storage only
  std::unique_ptr<PickleTensor> tensor;                        // Tensor only

  // Dict lookup by string key (the last assignment wins, as in Python); nullptr when absent or not a Dict.
  const PickleValue* find(std::string_view key) const {
    if (kind != PickleKind::Dict) return nullptr;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it)
      if (it->first->kind == PickleKind::String && it->first->text == key) return it->second;
    return nullptr;
  }
  bool is_none() const { return kind == PickleKind::None; }
};

// "dict", "tuple", "object 'torch.nn.modules.conv.Conv2d'", ... for error messages.
std::string describe(const PickleValue& value);

}  // namespace lab
