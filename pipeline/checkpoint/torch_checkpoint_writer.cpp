// save_checkpoint_pt: the storages first (one per tensor, contiguous, key = its index in the state dict),
// then the pickle that names them, then the zip members in torch.save's order.
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"

#include <cstdint>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint_detail.hpp"
#include "pipeline/checkpoint/pickle_writer.hpp"
#include "pipeline/checkpoint/safetensors_checkpoint.hpp"
#include "pipeline/checkpoint/zip_writer.hpp"

namespace lab {

namespace {

const char* storage_class(const std::string& dtype) {
  if (dtype == "F32") return "FloatStorage";
  if (dtype == "F16") return "HalfStorage";
  if (dtype == "BF16") return "BFloat16Storage";
  return "DoubleStorage";  // F64; stored_bytes has refused anything else
}

// One state-dict entry as it goes into the archive: its storage class, shape and bytes.
struct StoredTensor {
  std::string key;
  const char* storage_class;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The checkpoint's tensors, each BatchNorm's running_var followed by its num_batches_tracked (an int64 scalar
// 0: our Checkpoint keeps float tensors only, and torch's strict load_state_dict expects the counter).
std::vector<StoredTensor> stored_tensors(const Checkpoint& checkpoint, const std::filesystem::path& path) {
  const std::string running_var = "running_var", counter = "num_batches_tracked";
  std::vector<StoredTensor> stored;
  for (const auto& [key, tensor] : checkpoint.state_dict) {
    stored.push_back(
        {key, storage_class(tensor.stored_dtype), tensor.shape, stored_bytes(tensor, key, path)});
    if (key.size() < running_var.size() ||
        key.compare(key.size() - running_var.size(), running_var.size(), running_var))
      continue;
    const std::string counter_key = key.substr(0, key.size() - running_var.size()) + counter;
    if (!checkpoint.contains(counter_key))
      stored.push_back({counter_key, "LongStorage", {}, std::vector<uint8_t>(8, 0)});
  }
  return stored;
}

std::string archive_folder(const std::filesystem::path& path) {
  const std::string stem = path.stem().string();
  const bool plain =
      !stem.empty() &&
      stem.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
          std::string::npos;
  return plain ? stem : "archive";
}

// A JSON value as the plain Python data it reads as (dict, list, str, int, float, bool, None).
void write_json(PickleWriter& pickle, const nlohmann::json& value) {
  if (value.is_object()) {
    pickle.empty_dict();
    if (value.empty()) return;
    pickle.mark();
    for (const auto& [key, item] : value.items()) {
      pickle.text(key);
      write_json(pickle, item);
    }
    pickle.set_items();
  } else if (value.is_array()) {
    pickle.empty_list();
    if (value.empty()) return;
    pickle.mark();
    for (const auto& item : value) write_json(pickle, item);
    pickle.appends();
  } else if (value.is_string()) {
    pickle.text(value.get<std::string>());
  } else if (value.is_boolean()) {
    pickle.boolean(value.get<bool>());
  } else if (value.is_number_integer() &&
             (!value.is_number_unsigned() || value.get<uint64_t>() <= uint64_t{INT64_MAX})) {
    pickle.integer(value.get<int64_t>());
  } else if (value.is_number()) {
    pickle.real(value.get<double>());
  } else {
    pickle.none();
  }
}

// torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict()), contiguous.
void write_tensor(PickleWriter& pickle, const StoredTensor& tensor, const std::string& storage_key) {
  int64_t count = 1;
  std::vector<int64_t> strides(tensor.shape.size());
  for (size_t d = tensor.shape.size(); d-- > 0;) {
    strides[d] = count;
    count *= tensor.shape[d];
  }
  pickle.global("torch._utils", "_rebuild_tensor_v2").mark();
  pickle.mark().text("storage").global("torch", tensor.storage_class).text(storage_key);
  pickle.text("cpu").integer(count).tuple().persistent_id();
  pickle.integer(0);
  pickle.mark();
  for (int64_t d : tensor.shape) pickle.integer(d);
  pickle.tuple().mark();
  for (int64_t s : strides) pickle.integer(s);
  pickle.tuple().boolean(false).global("collections", "OrderedDict").empty_tuple().reduce();
  pickle.tuple().reduce();
}

std::vector<uint8_t> pickle_of(const Checkpoint& checkpoint, const std::vector<StoredTensor>& tensors,
                               const TrainingRecord& record, const std::string& where) {
  PickleWriter pickle;
  pickle.empty_dict().mark();
  pickle.text("model").global("collections", "OrderedDict").empty_tuple().reduce();
  if (!tensors.empty()) {
    pickle.mark();
    for (size_t i = 0; i < tensors.size(); ++i)
      write_tensor(pickle.text(tensors[i].key), tensors[i], std::to_string(i));
    pickle.set_items();
  }
  pickle.text("names").empty_dict();
  if (!checkpoint.class_names.empty()) {
    pickle.mark();
    for (size_t id = 0; id < checkpoint.class_names.size(); ++id)
      pickle.integer(static_cast<int64_t>(id)).text(checkpoint.class_names[id]);
    pickle.set_items();
  }
  pickle.text("nc").integer(checkpoint.nc);
  pickle.text("scale").text(checkpoint.scale);
  pickle.text("yaml");
  const nlohmann::json yaml =
      nlohmann::json::parse(checkpoint.yaml_json.empty() ? "{}" : checkpoint.yaml_json, nullptr, false);
  if (yaml.is_discarded()) throw UsageError(where + ": the checkpoint's model.yaml is not JSON");
  write_json(pickle, yaml);
  pickle.text("epoch").integer(record.epoch);
  pickle.text("train_metrics").empty_dict();
  if (!record.train_metrics.empty()) {
    pickle.mark();
    for (const auto& [name, value] : record.train_metrics) pickle.text(name).real(value);
    pickle.set_items();
  }
  pickle.text("format").text(kCheckpointFormatTag);
  pickle.set_items();
  return pickle.finish();
}

}  // namespace

void save_checkpoint_pt(const Checkpoint& checkpoint, const std::filesystem::path& path,
                        const TrainingRecord& record) {
  const std::vector<StoredTensor> tensors = stored_tensors(checkpoint, path);
  const std::vector<uint8_t> pickle = pickle_of(checkpoint, tensors, record, path.string());

  const std::string folder = archive_folder(path) + "/";
  static const std::string little = "little", version = "3\n";
  auto bytes_of = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  std::vector<std::string> names = {folder + "data.pkl", folder + "byteorder"};
  for (size_t i = 0; i < tensors.size(); ++i) names.push_back(folder + "data/" + std::to_string(i));
  names.push_back(folder + "version");
  std::vector<ZipMember> members = {{names[0], pickle}, {names[1], bytes_of(little)}};
  for (size_t i = 0; i < tensors.size(); ++i) members.push_back({names[i + 2], tensors[i].bytes});
  members.push_back({names.back(), bytes_of(version)});

  write_file_atomically(
      path, [&](const std::filesystem::path& temporary) { write_stored_zip(temporary, members); });
}

}  // namespace lab
