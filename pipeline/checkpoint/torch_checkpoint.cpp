// The .pt loader: locate data.pkl, parse it with the restricted VM, pick the model object and walk its
// modules (depth- and count-limited) into state-dict keys, or take a pickled state dict as it is; read and
// gather every floating-point tensor from its storage member with bounds checks, and take names / nc / scale
// / yaml from the model's attributes (or, for a state dict, from the checkpoint dict beside it).
#include "pipeline/checkpoint/torch_checkpoint.hpp"

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint_detail.hpp"
#include "pipeline/checkpoint/half_float.hpp"
#include "pipeline/checkpoint/pickle_reader.hpp"
#include "pipeline/checkpoint/zip_archive.hpp"
#include "pipeline/safetensors.hpp"

namespace lab {
namespace {

constexpr int kMaxTreeDepth = 100;           // module nesting / yaml nesting
constexpr size_t kMaxModules = 100'000;      // modules one model may have
constexpr size_t kMaxJsonNodes = 1'000'000;  // values converted for model.yaml
constexpr int64_t kMaxTensorElements = int64_t{1} << 32;

struct TensorEntry {
  std::string key;
  const PickleTensor* tensor;
};

class TorchCheckpointReader {
 public:
  explicit TorchCheckpointReader(const std::filesystem::path& path)
      : path_(path), file_(path.string()), archive_(ZipArchive::open(path)) {}

  Checkpoint read() {
    const std::string pickle_member = find_pickle_member();
    prefix_ = pickle_member.substr(0, pickle_member.size() - std::string("data.pkl").size());
    check_byte_order();
    const std::vector<uint8_t> pickle_bytes = archive_.read(pickle_member);
    const PickleDocument document = PickleDocument::parse(pickle_bytes, file_ + ": " + pickle_member);

    const PickleValue& root = document.root();
    if (root.kind != PickleKind::Dict)
      throw UsageError(file_ + ": the pickled checkpoint is a " + describe(root) + ", not a dict");
    const PickleValue* model = root.find("ema");
    if (model == nullptr || model->is_none()) model = root.find("model");
    if (model == nullptr || model->is_none())
      throw UsageError(file_ + ": no 'model' or 'ema' in the checkpoint (keys: " + dict_keys(root) + ")");

    // Ultralytics pickles the model module (its attributes hold names and yaml); our state-dict files
    // (torch_checkpoint_writer.hpp) hold a dict of tensors, with names and yaml beside it.
    std::vector<TensorEntry> entries;
    const PickleValue* attributes_of_model = &root;
    if (model->kind == PickleKind::Dict) {
      read_state_dict(*model, entries);
    } else {
      if (model->kind != PickleKind::Object || model->state == nullptr ||
          model->state->kind != PickleKind::Dict)
        throw UsageError(file_ + ": the model is a " + describe(*model) + " without a module state");
      walk_module(*model, "", 0, entries);
      attributes_of_model = model->state;
    }

    Checkpoint checkpoint;
    checkpoint.path = path_;
    for (const TensorEntry& entry : entries) {
      if (!is_float_dtype(entry.tensor->storage->storage->dtype)) continue;  // num_batches_tracked & co.
      checkpoint.state_dict[entry.key] = materialize(entry);
    }
    if (checkpoint.state_dict.empty())
      throw UsageError(file_ + ": the model holds no floating-point state-dict tensors");

    const PickleValue& attributes = *attributes_of_model;
    const PickleValue* yaml = attributes.find("yaml");
    nlohmann::json yaml_json = nlohmann::json::object();
    if (yaml != nullptr && yaml->kind == PickleKind::Dict) {
      size_t budget = kMaxJsonNodes;
      yaml_json = to_json(*yaml, 0, budget);
    }
    checkpoint.yaml_json = yaml_json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (yaml_json.contains("scale") && yaml_json["scale"].is_string())
      checkpoint.scale = yaml_json["scale"].get<std::string>();
    else if (const PickleValue* scale = attributes.find("scale");
             scale != nullptr && scale->kind == PickleKind::String)
      checkpoint.scale = scale->text;

    checkpoint.class_names = read_names(attributes.find("names"));
    int nc = 0;
    if (yaml_json.contains("nc") && yaml_json["nc"].is_number_integer()) {
      const int64_t declared = yaml_json["nc"].get<int64_t>();
      if (declared <= 0 || declared > kMaxClasses)
        throw UsageError(file_ + ": model.yaml nc " + std::to_string(declared) + " is out of range");
      nc = static_cast<int>(declared);
    } else if (!checkpoint.class_names.empty()) {
      nc = static_cast<int>(checkpoint.class_names.size());
    } else {
      nc = class_count_from_head(checkpoint.state_dict);
    }
    if (nc <= 0) throw UsageError(file_ + ": cannot tell the number of classes (no yaml nc, names or head)");
    if (checkpoint.class_names.empty()) checkpoint.class_names = default_class_names(nc);
    if (static_cast<int>(checkpoint.class_names.size()) != nc)
      throw UsageError(file_ + ": model.names has " + std::to_string(checkpoint.class_names.size()) +
                       " entries but model.yaml nc is " + std::to_string(nc));
    checkpoint.nc = nc;
    return checkpoint;
  }

 private:
  // `<prefix>/data.pkl` with a single top-level folder, as torch.save writes it.
  std::string find_pickle_member() const {
    for (const std::string& name : archive_.member_names()) {
      const size_t slash = name.find('/');
      if (slash != std::string::npos && name.substr(slash + 1) == "data.pkl") return name;
    }
    throw UsageError(file_ +
                     ": missing data.pkl (no '<folder>/data.pkl' member; not a torch.save checkpoint)");
  }

  void check_byte_order() const {
    const std::string member = prefix_ + "byteorder";
    if (!archive_.contains(member)) return;  // older writers omit it; they were little-endian
    const std::vector<uint8_t> text = archive_.read(member);
    if (std::string(text.begin(), text.end()) != "little")
      throw UsageError(file_ + ": member '" + member + "': only little-endian checkpoints are supported");
  }

  static std::string dict_keys(const PickleValue& dict) {
    std::string keys;
    for (const auto& [key, value] : dict.entries)
      if (key->kind == PickleKind::String) keys += (keys.empty() ? "" : ", ") + key->text;
    return keys.empty() ? "none" : keys;
  }

  static bool is_float_dtype(const std::string& dtype) {
    return dtype == "F16" || dtype == "F32" || dtype == "BF16" || dtype == "F64";
  }

  // torch's state_dict(): parameters, then persistent buffers, then submodules, skipping None entries.
  void walk_module(const PickleValue& module, const std::string& prefix, int depth,
                   std::vector<TensorEntry>& entries) {
    const std::string name =
        prefix.empty() ? "the model" : "module '" + prefix.substr(0, prefix.size() - 1) + "'";
    if (depth > kMaxTreeDepth)
      throw UsageError(file_ + ": " + name + " is nested deeper than " + std::to_string(kMaxTreeDepth));
    if (++module_count_ > kMaxModules)
      throw UsageError(file_ + ": the model has more than " + std::to_string(kMaxModules) + " modules");
    if (module.kind != PickleKind::Object || module.state == nullptr ||
        module.state->kind != PickleKind::Dict)
      throw UsageError(file_ + ": " + name + " is a " + describe(module) + " without a module state");
    const PickleValue& state = *module.state;

    std::set<std::string> non_persistent;
    if (const PickleValue* set = state.find("_non_persistent_buffers_set");
        set != nullptr && set->kind == PickleKind::Set)
      for (const PickleValue* item : set->items)
        if (item->kind == PickleKind::String) non_persistent.insert(item->text);

    const char* sections[] = {"_parameters", "_buffers", "_modules"};
    for (const char* section : sections) {
      const PickleValue* dict = state.find(section);
      if (dict == nullptr) continue;
      if (dict->kind != PickleKind::Dict)
        throw UsageError(file_ + ": " + name + " " + section + " is a " + describe(*dict) + ", not a dict");
      const bool submodules = std::strcmp(section, "_modules") == 0;
      for (const auto& [key, value] : dict->entries) {
        if (key->kind != PickleKind::String)
          throw UsageError(file_ + ": " + name + " " + section + " has a " + describe(*key) + " key");
        if (value->is_none()) continue;
        const std::string full = prefix + key->text;
        if (submodules) {
          walk_module(*value, full + ".", depth + 1, entries);
          continue;
        }
        if (std::strcmp(section, "_buffers") == 0 && non_persistent.count(key->text)) continue;
        if (value->kind != PickleKind::Tensor)
          throw UsageError(file_ + ": state-dict entry '" + full + "' is a " + describe(*value) +
                           ", not a tensor");
        entries.push_back({full, value->tensor.get()});
      }
    }
  }

  // A state dict pickled as a dict: str -> tensor, in its own order.
  void read_state_dict(const PickleValue& dict, std::vector<TensorEntry>& entries) const {
    for (const auto& [key, value] : dict.entries) {
      if (key->kind != PickleKind::String)
        throw UsageError(file_ + ": the state dict has a " + describe(*key) + " key");
      if (value->kind != PickleKind::Tensor)
        throw UsageError(file_ + ": state-dict entry '" + key->text + "' is a " + describe(*value) +
                         ", not a tensor");
      entries.push_back({key->text, value->tensor.get()});
    }
  }

  const std::vector<uint8_t>& storage_bytes(const PickleStorage& storage) {
    auto it = storages_.find(storage.key);
    if (it != storages_.end()) return it->second;
    const std::string member = prefix_ + "data/" + storage.key;
    std::vector<uint8_t> bytes = archive_.read(member);
    if (static_cast<uint64_t>(storage.numel) > bytes.size() / storage.element_bytes)
      throw UsageError(file_ + ": member '" + member + "' has " + std::to_string(bytes.size()) +
                       " bytes but its storage of " + std::to_string(storage.numel) + " " + storage.dtype +
                       " elements needs " +
                       std::to_string(static_cast<uint64_t>(storage.numel) * storage.element_bytes));
    return storages_.emplace(storage.key, std::move(bytes)).first->second;
  }

  HostTensor materialize(const TensorEntry& entry) {
    const PickleTensor& t = *entry.tensor;
    const PickleStorage& storage = *t.storage->storage;
    const std::string at = file_ + ": tensor '" + entry.key + "': ";
    int64_t count = 1;
    for (size_t d = 0; d < t.size.size(); ++d) {
      if (t.size[d] < 0 || t.stride[d] < 0)
        throw UsageError(at + "negative size or stride " + shape_text(t.size) + " / " + shape_text(t.stride));
      if (t.size[d] != 0 && count > kMaxTensorElements / t.size[d])
        throw UsageError(at + "shape " + shape_text(t.size) + " is too large");
      count *= t.size[d];
    }
    if (t.storage_offset < 0) throw UsageError(at + "negative storage offset");
    if (count > 0) {
      // The last element the view touches must lie inside the storage (checked without overflow).
      int64_t last = t.storage_offset;
      for (size_t d = 0; d < t.size.size(); ++d) {
        if (t.size[d] > 1 && t.stride[d] > (storage.numel - last) / (t.size[d] - 1))
          throw UsageError(at + "the view (offset " + std::to_string(t.storage_offset) + ", size " +
                           shape_text(t.size) + ", stride " + shape_text(t.stride) + ") runs past storage '" +
                           storage.key + "' of " + std::to_string(storage.numel) + " elements");
        last += (t.size[d] - 1) * t.stride[d];
      }
      if (last >= storage.numel)
        throw UsageError(at + "the view ends at element " + std::to_string(last) + " of storage '" +
                         storage.key + "' which has " + std::to_string(storage.numel));
      if (count > storage.numel)
        throw UsageError(at + "has more elements than storage '" + storage.key + "' (a broadcast view)");
    }
    const std::vector<uint8_t>& bytes = storage_bytes(storage);

    HostTensor out;
    out.shape = t.size;
    out.stored_dtype = storage.dtype;
    out.values.resize(static_cast<size_t>(count));
    const Converter convert = converter(storage.dtype);
    const size_t rank = t.size.size();
    std::vector<int64_t> index(rank, 0);
    int64_t element = t.storage_offset;
    for (int64_t i = 0; i < count; ++i) {
      out.values[static_cast<size_t>(i)] = convert(bytes.data() + element * storage.element_bytes);
      // Advance the multi-index (row-major), updating the storage element incrementally.
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < t.size[d]) {
          element += t.stride[d];
          break;
        }
        element -= (t.size[d] - 1) * t.stride[d];
        index[d] = 0;
      }
    }
    return out;
  }

  using Converter = float (*)(const uint8_t*);
  static Converter converter(const std::string& dtype) {
    if (dtype == "F16")
      return [](const uint8_t* p) { return half_bits_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); };
    if (dtype == "BF16")
      return [](const uint8_t* p) { return bf16_bits_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); };
    if (dtype == "F32")
      return [](const uint8_t* p) {
        float value;
        std::memcpy(&value, p, 4);
        return value;
      };
    return [](const uint8_t* p) {
      double value;
      std::memcpy(&value, p, 8);
      return static_cast<float>(value);
    };
  }

  std::vector<std::string> read_names(const PickleValue* names) const {
    std::vector<std::string> result;
    if (names == nullptr || names->is_none()) return result;
    if (names->kind == PickleKind::List || names->kind == PickleKind::Tuple) {
      if (names->items.size() > static_cast<size_t>(kMaxClasses))
        throw UsageError(file_ + ": model.names has more than " + std::to_string(kMaxClasses) + " entries");
      for (const PickleValue* item : names->items) {
        if (item->kind != PickleKind::String)
          throw UsageError(file_ + ": model.names holds a " + describe(*item) + ", not a str");
        result.push_back(item->text);
      }
      return result;
    }
    if (names->kind != PickleKind::Dict)
      throw UsageError(file_ + ": model.names is a " + describe(*names) + ", not a dict or list");
    std::map<int64_t, std::string> by_id;
    for (const auto& [key, value] : names->entries) {
      if (key->kind != PickleKind::Int || key->integer < 0 || key->integer >= kMaxClasses ||
          value->kind != PickleKind::String)
        throw UsageError(file_ + ": model.names must map class ids 0.." + std::to_string(kMaxClasses - 1) +
                         " to str (found a " + describe(*key) + " -> " + describe(*value) + " entry)");
      by_id[key->integer] = value->text;
    }
    for (const auto& [id, name] : by_id) {
      if (id != static_cast<int64_t>(result.size()))
        throw UsageError(file_ + ": model.names has no entry for class " + std::to_string(result.size()));
      result.push_back(name);
    }
    return result;
  }

  nlohmann::json to_json(const PickleValue& value, int depth, size_t& budget) const {
    if (depth > kMaxTreeDepth)
      throw UsageError(file_ + ": model.yaml is nested deeper than " + std::to_string(kMaxTreeDepth));
    if (budget-- == 0)
      throw UsageError(file_ + ": model.yaml has more than " + std::to_string(kMaxJsonNodes) + " values");
    switch (value.kind) {
      case PickleKind::None:
        return nullptr;
      case PickleKind::Bool:
        return value.boolean;
      case PickleKind::Int:
        return value.integer;
      case PickleKind::Float:
        return value.real;
      case PickleKind::String:
        return value.text;
      case PickleKind::Tuple:
      case PickleKind::List:
      case PickleKind::Set: {
        nlohmann::json array = nlohmann::json::array();
        for (const PickleValue* item : value.items) array.push_back(to_json(*item, depth + 1, budget));
        return array;
      }
      case PickleKind::Dict: {
        nlohmann::json object = nlohmann::json::object();
        for (const auto& [key, item] : value.entries) {
          const std::string name = key->kind == PickleKind::String ? key->text
                                   : key->kind == PickleKind::Int  ? std::to_string(key->integer)
                                                                   : describe(*key);
          object[name] = to_json(*item, depth + 1, budget);
        }
        return object;
      }
      case PickleKind::Global:
      case PickleKind::Object:
        return value.text;
      default:
        return nullptr;
    }
  }

  std::filesystem::path path_;
  std::string file_;
  ZipArchive archive_;
  std::string prefix_;  // "<folder>/"
  size_t module_count_ = 0;
  std::map<std::string, std::vector<uint8_t>> storages_;
};

}  // namespace

Checkpoint load_torch_checkpoint(const std::filesystem::path& path) {
  return TorchCheckpointReader(path).read();
}

}  // namespace lab
