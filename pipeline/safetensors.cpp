// Safetensors reading (validation of header, offsets and sizes; dtype conversion to float) and writing.
#include "pipeline/safetensors.hpp"

#include <bit>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// Bytes per element of each dtype the format defines; 0 for an unknown name.
size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

template <class T>
T load_le(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string where(const std::filesystem::path& path) {
  return path.string() + ": ";
}

}  // namespace

size_t SafetensorsTensorInfo::element_count() const {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  return count;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

SafetensorsFile SafetensorsFile::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(where(path) + "cannot open the file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    throw UsageError(where(path) + "truncated header: the file has " + std::to_string(bytes.size()) +
                     " bytes, the header length alone needs 8");
  const uint64_t header_bytes = load_le<uint64_t>(bytes.data());
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8)
    throw UsageError(where(path) + "truncated header: it claims " + std::to_string(header_bytes) +
                     " bytes but the file has " + std::to_string(bytes.size() - 8) + " after the length");

  nlohmann::json header;
  try {
    header =
        nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<ptrdiff_t>(header_bytes));
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(where(path) + "the header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw UsageError(where(path) + "the header is not a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_.assign(bytes.begin() + 8 + static_cast<ptrdiff_t>(header_bytes), bytes.end());
  const uint64_t data_bytes = file.data_.size();

  for (const auto& [key, entry] : header.items()) {
    const std::string at = where(path) + "tensor '" + key + "': ";
    if (key == "__metadata__") {
      if (!entry.is_object()) throw UsageError(where(path) + "__metadata__ is not an object");
      for (const auto& [name, value] : entry.items()) {
        if (!value.is_string()) throw UsageError(where(path) + "__metadata__ '" + name + "' is not a string");
        file.metadata_[name] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw UsageError(at + "needs an object with dtype, shape and data_offsets");
    SafetensorsTensorInfo info;
    if (!entry["dtype"].is_string()) throw UsageError(at + "dtype is not a string");
    info.dtype = entry["dtype"].get<std::string>();
    const size_t element_bytes = dtype_size(info.dtype);
    if (element_bytes == 0) throw UsageError(at + "unknown dtype '" + info.dtype + "'");
    const auto& shape = entry["shape"];
    if (!shape.is_array()) throw UsageError(at + "shape is not an array");
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw UsageError(at + "shape " + shape.dump() + " has an entry that is not a non-negative integer");
      info.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw UsageError(at + "data_offsets must be two non-negative integers");
    info.begin = offsets[0].get<uint64_t>();
    info.end = offsets[1].get<uint64_t>();
    if (info.begin > info.end || info.end > data_bytes)
      throw UsageError(at + "data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
                       "] out of range (the data section has " + std::to_string(data_bytes) + " bytes)");
    if (info.end - info.begin != info.element_count() * element_bytes)
      throw UsageError(at + "data_offsets span " + std::to_string(info.end - info.begin) + " bytes but " +
                       info.dtype + " " + shape_text(info.shape) + " needs " +
                       std::to_string(info.element_count() * element_bytes));
    file.tensors_[key] = std::move(info);
  }
  return file;
}

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> names;
  for (const auto& [key, info] : tensors_) names.push_back(key);
  return names;
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& key) const {
  auto it = tensors_.find(key);
  if (it != tensors_.end()) return it->second;
  std::string available;
  for (const auto& [name, info] : tensors_) available += (available.empty() ? "" : ", ") + name;
  throw UsageError(where(path_) + "no tensor named '" + key +
                   "' (the file has: " + (available.empty() ? "none" : available) + ")");
}

std::vector<float> SafetensorsFile::floats(const std::string& key) const {
  const SafetensorsTensorInfo& t = info(key);
  const size_t n = t.element_count();
  const uint8_t* p = data_.data() + t.begin;
  std::vector<float> out(n);
  const std::string& d = t.dtype;
  for (size_t i = 0; i < n; ++i) {
    if (d == "F32")
      out[i] = load_le<float>(p + 4 * i);
    else if (d == "F64")
      out[i] = static_cast<float>(load_le<double>(p + 8 * i));
    else if (d == "F16")
      out[i] = half_to_float(load_le<uint16_t>(p + 2 * i));
    else if (d == "BF16")
      out[i] = std::bit_cast<float>(static_cast<uint32_t>(load_le<uint16_t>(p + 2 * i)) << 16);
    else if (d == "I64")
      out[i] = static_cast<float>(load_le<int64_t>(p + 8 * i));
    else if (d == "I32")
      out[i] = static_cast<float>(load_le<int32_t>(p + 4 * i));
    else if (d == "I16")
      out[i] = static_cast<float>(load_le<int16_t>(p + 2 * i));
    else if (d == "I8")
      out[i] = static_cast<float>(load_le<int8_t>(p + i));
    else if (d == "U64")
      out[i] = static_cast<float>(load_le<uint64_t>(p + 8 * i));
    else if (d == "U32")
      out[i] = static_cast<float>(load_le<uint32_t>(p + 4 * i));
    else if (d == "U16")
      out[i] = static_cast<float>(load_le<uint16_t>(p + 2 * i));
    else if (d == "U8" || d == "BOOL")
      out[i] = static_cast<float>(p[i]);
    else
      throw UsageError(where(path_) + "tensor '" + key + "': no conversion from " + d + " to float");
  }
  return out;
}

std::vector<float> SafetensorsFile::floats(const std::string& key,
                                           const std::vector<int64_t>& expected_shape) const {
  const SafetensorsTensorInfo& t = info(key);
  if (t.shape != expected_shape)
    throw UsageError(where(path_) + "tensor '" + key + "' has shape " + shape_text(t.shape) + ", expected " +
                     shape_text(expected_shape));
  return floats(key);
}

SafetensorsTensor f32_tensor(std::string key, std::vector<int64_t> shape, const std::vector<float>& values) {
  SafetensorsTensor t{std::move(key), "F32", std::move(shape), std::vector<uint8_t>(values.size() * 4)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    SafetensorsTensorInfo info{t.dtype, t.shape, 0, 0};
    const size_t element_bytes = dtype_size(t.dtype);
    if (element_bytes == 0 || t.bytes.size() != info.element_count() * element_bytes)
      throw UsageError(where(path) + "tensor '" + t.key + "': " + std::to_string(t.bytes.size()) +
                       " bytes do not match " + t.dtype + " " + shape_text(t.shape));
    header[t.key] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(where(path) + "cannot open the file for writing");
  const uint64_t header_bytes = text.size();
  out.write(reinterpret_cast<const char*>(&header_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const SafetensorsTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) throw UsageError(where(path) + "write failed");
}

}  // namespace lab
