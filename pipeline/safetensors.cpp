// Safetensors reading (validation of header, offsets and sizes; dtype conversion to float) and writing.
#include "pipeline/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr size_t kMaxShown = 80;  // bytes of an untrusted value (key, dtype, shape) quoted in a message

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
  return printable_path(path) + ": ";
}

// The header is one JSON object, optionally padded with trailing spaces, nothing else: no NUL, no second
// value, no other whitespace or byte after the object.
nlohmann::json parse_header(std::string_view text, const std::filesystem::path& path) {
  const size_t last = text.find_last_not_of(' ');
  const std::string_view json = text.substr(0, last == std::string_view::npos ? 0 : last + 1);
  const auto refuse = [&] {
    return UsageError(where(path) + "the header is not one JSON object padded with spaces");
  };
  if (json.empty() || json.front() != '{' || json.find('\0') != std::string_view::npos) throw refuse();
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(where(path) + "the header is not valid JSON (" + printable(e.what(), kMaxShown) + ")");
  }
  if (!header.is_object() || json.back() != '}') throw refuse();
  return header;
}

// dtype, shape and data_offsets of one tensor entry: offsets inside the data section, spanning the bytes the
// dtype and shape need. `at` starts every message.
SafetensorsTensorInfo parse_tensor(const nlohmann::json& entry, uint64_t data_bytes, const std::string& at) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets"))
    throw UsageError(at + "needs an object with dtype, shape and data_offsets");
  SafetensorsTensorInfo info;
  if (!entry["dtype"].is_string()) throw UsageError(at + "dtype is not a string");
  info.dtype = entry["dtype"].get<std::string>();
  const size_t element_bytes = dtype_size(info.dtype);
  if (element_bytes == 0) throw UsageError(at + "unknown dtype '" + printable(info.dtype, kMaxShown) + "'");
  const auto& shape = entry["shape"];
  if (!shape.is_array()) throw UsageError(at + "shape is not an array");
  uint64_t byte_count = element_bytes;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw UsageError(at + "shape " + printable(shape.dump(), kMaxShown) +
                       " has an entry that is not a non-negative integer");
    const auto extent = static_cast<uint64_t>(d.get<int64_t>());
    if (extent != 0 && byte_count > UINT64_MAX / extent)
      throw UsageError(at + "shape " + printable(shape.dump(), kMaxShown) + " has more bytes than 2^64");
    byte_count *= extent;
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
  if (info.end - info.begin != byte_count)
    throw UsageError(at + "data_offsets span " + std::to_string(info.end - info.begin) + " bytes but " +
                     info.dtype + " " + printable(shape_text(info.shape), kMaxShown) + " needs " +
                     std::to_string(byte_count));
  return info;
}

// In the order of their offsets, the tensors tile the data section exactly: the first begins at 0, each
// begins where the previous one ends (no gap, no overlap), the last ends at the end of the file (each one
// already lies inside the data section).
void check_data_layout(const std::map<std::string, SafetensorsTensorInfo>& tensors, uint64_t data_bytes,
                       const std::filesystem::path& path) {
  std::vector<std::pair<const std::string*, const SafetensorsTensorInfo*>> order;
  for (const auto& [key, info] : tensors) order.emplace_back(&key, &info);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second->begin, a.second->end) < std::pair(b.second->begin, b.second->end);
  });
  uint64_t covered = 0;
  for (const auto& [key, info] : order) {
    const std::string at = where(path) + "tensor '" + printable(*key, kMaxShown) + "': data_offsets [" +
                           std::to_string(info->begin) + ", " + std::to_string(info->end) + "] ";
    if (info->begin < covered)
      throw UsageError(at + "overlap the tensor before it (which ends at " + std::to_string(covered) + ")");
    if (info->begin > covered)
      throw UsageError(at + "leave a gap after byte " + std::to_string(covered) + " of the data section");
    covered = info->end;
  }
  if (covered != data_bytes)
    throw UsageError(where(path) + "the data section has " + std::to_string(data_bytes) +
                     " bytes but the tensors cover " + std::to_string(covered) +
                     " (header length or data_offsets wrong)");
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
  const std::string bytes = read_input_file(path, "safetensors file");
  if (bytes.size() < 8)
    throw UsageError(where(path) + "truncated header: the file has " + std::to_string(bytes.size()) +
                     " bytes, the header length alone needs 8");
  const uint64_t header_bytes = load_le<uint64_t>(reinterpret_cast<const uint8_t*>(bytes.data()));
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8)
    throw UsageError(where(path) + "truncated header: it claims " + std::to_string(header_bytes) +
                     " bytes but the file has " + std::to_string(bytes.size() - 8) + " after the length");

  SafetensorsFile file;
  file.path_ = path;
  const nlohmann::json header = parse_header(std::string_view(bytes).substr(8, header_bytes), path);
  file.data_.assign(bytes.begin() + 8 + static_cast<ptrdiff_t>(header_bytes), bytes.end());
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) throw UsageError(where(path) + "__metadata__ is not an object");
      for (const auto& [name, value] : entry.items()) {
        if (!value.is_string())
          throw UsageError(where(path) + "__metadata__ '" + printable(name, kMaxShown) + "' is not a string");
        file.metadata_[name] = value.get<std::string>();
      }
      continue;
    }
    file.tensors_[key] =
        parse_tensor(entry, file.data_.size(), where(path) + "tensor '" + printable(key, kMaxShown) + "': ");
  }
  check_data_layout(file.tensors_, file.data_.size(), path);
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
  throw UsageError(where(path_) + "no tensor named '" + printable(key, kMaxShown) + "' (the file has: " +
                   (available.empty() ? "none" : printable(available, 4 * kMaxShown)) + ")");
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
      throw UsageError(where(path_) + "tensor '" + printable(key, kMaxShown) + "': no conversion from " + d +
                       " to float");
  }
  return out;
}

std::vector<float> SafetensorsFile::floats(const std::string& key,
                                           const std::vector<int64_t>& expected_shape) const {
  const SafetensorsTensorInfo& t = info(key);
  if (t.shape != expected_shape)
    throw UsageError(where(path_) + "tensor '" + printable(key, kMaxShown) + "' has shape " +
                     printable(shape_text(t.shape), kMaxShown) + ", expected " + shape_text(expected_shape));
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
