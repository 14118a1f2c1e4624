// Safetensors files: read (every tensor converted to float on request) and write.
// Format: an 8-byte little-endian header length, a JSON header mapping each key to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section), an optional
// "__metadata__" object of strings, then the raw little-endian data. Every malformation is reported as a
// UsageError naming the file (and the key where there is one).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lab {

struct SafetensorsTensorInfo {
  std::string dtype;            // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::vector<int64_t> shape;   // empty for a scalar
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  size_t element_count() const;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file (header, offsets, sizes).
  static SafetensorsFile load(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> keys() const;  // sorted
  bool contains(const std::string& key) const { return tensors_.count(key) != 0; }
  // Throws UsageError naming the file, the key and the keys that exist.
  const SafetensorsTensorInfo& info(const std::string& key) const;
  // The tensor converted to float (integers and booleans by value). Throws for dtypes without a conversion.
  std::vector<float> floats(const std::string& key) const;
  // As `floats`, after checking the shape (throws naming the file, key, and both shapes).
  std::vector<float> floats(const std::string& key, const std::vector<int64_t>& expected_shape) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::filesystem::path path_;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<uint8_t> data_;
};

// One tensor to write: raw little-endian bytes of `dtype`.
struct SafetensorsTensor {
  std::string key;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

SafetensorsTensor f32_tensor(std::string key, std::vector<int64_t> shape, const std::vector<float>& values);

// Writes the tensors in the given order (header padded with spaces to a multiple of 8 bytes).
// Throws UsageError when a tensor's byte count does not match its shape and dtype, or the file cannot be
// written.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "[1, 4, 8400]"
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace lab
