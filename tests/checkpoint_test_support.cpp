// Implementation of the checkpoint test helpers (pickle assembler, libzip writer/reader, asset lookup).
#include "tests/checkpoint_test_support.hpp"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <zip.h>

#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"

namespace lab::test {

PickleBytes& PickleBytes::proto(int version) {
  bytes_.push_back(0x80);
  bytes_.push_back(static_cast<uint8_t>(version));
  return *this;
}

PickleBytes& PickleBytes::op(char opcode) {
  bytes_.push_back(static_cast<uint8_t>(opcode));
  return *this;
}

PickleBytes& PickleBytes::raw(const std::string& bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

PickleBytes& PickleBytes::global(const std::string& module, const std::string& name) {
  return op('c').raw(module + "\n" + name + "\n");
}

PickleBytes& PickleBytes::text(const std::string& s) {
  op('X');
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(s.size() >> (8 * i)));
  return raw(s);
}

PickleBytes& PickleBytes::integer(int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    op('J');
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i)));
    return *this;
  }
  bytes_.push_back(0x8a);
  bytes_.push_back(8);
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
  return *this;
}

PickleBytes& PickleBytes::real(double v) {
  op('G');
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 7; i >= 0; --i) bytes_.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  return *this;
}

PickleBytes& PickleBytes::put(uint32_t index) {
  op('r');
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(index >> (8 * i)));
  return *this;
}

PickleBytes& PickleBytes::get(uint32_t index) {
  op('j');
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(index >> (8 * i)));
  return *this;
}

PickleBytes& PickleBytes::begin_object(const std::string& module, const std::string& name) {
  return global(module, name).op(')').raw("\x81");
}

PickleBytes& PickleBytes::tensor(const std::string& storage_type, const std::string& key, int64_t numel,
                                 int64_t offset, const std::vector<int64_t>& size,
                                 const std::vector<int64_t>& stride) {
  global("torch._utils", "_rebuild_parameter");
  op('(');
  global("torch._utils", "_rebuild_tensor_v2");
  op('(');
  op('(').text("storage").global("torch", storage_type).text(key).text("cpu").integer(numel).op('t');
  op('Q');
  integer(offset);
  op('(');
  for (int64_t d : size) integer(d);
  op('t');
  op('(');
  for (int64_t d : stride) integer(d);
  op('t');
  raw("\x89");  // requires_grad False
  global("collections", "OrderedDict").op(')').op('R');
  op('t').op('R');  // _rebuild_tensor_v2(...)
  raw("\x89");
  global("collections", "OrderedDict").op(')').op('R');
  op('t').op('R');  // _rebuild_parameter(tensor, False, OrderedDict())
  return *this;
}

namespace {

[[noreturn]] void zip_failure(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error("test zip " + path.string() + ": " + what);
}

void add_or_replace(zip* archive, const std::filesystem::path& path, const std::string& member,
                    const std::string& bytes) {
  void* copy = std::malloc(bytes.empty() ? 1 : bytes.size());
  std::memcpy(copy, bytes.data(), bytes.size());
  zip_source_t* source = zip_source_buffer(archive, copy, bytes.size(), 1);
  if (source == nullptr) zip_failure(path, "zip_source_buffer");
  const zip_int64_t index =
      zip_file_add(archive, member.c_str(), source, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
  if (index < 0) {
    zip_source_free(source);
    zip_failure(path, zip_strerror(archive));
  }
  zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
}

}  // namespace

void write_zip(const std::filesystem::path& path,
               const std::vector<std::pair<std::string, std::string>>& members) {
  int code = 0;
  zip* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (archive == nullptr) zip_failure(path, "zip_open " + std::to_string(code));
  for (const auto& [name, bytes] : members) add_or_replace(archive, path, name, bytes);
  if (zip_close(archive) != 0) zip_failure(path, zip_strerror(archive));
}

void replace_zip_member(const std::filesystem::path& path, const std::string& member,
                        const std::string& bytes) {
  int code = 0;
  zip* archive = zip_open(path.c_str(), 0, &code);
  if (archive == nullptr) zip_failure(path, "zip_open " + std::to_string(code));
  add_or_replace(archive, path, member, bytes);
  if (zip_close(archive) != 0) zip_failure(path, zip_strerror(archive));
}

std::string read_zip_member(const std::filesystem::path& path, const std::string& member) {
  int code = 0;
  zip* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (archive == nullptr) zip_failure(path, "zip_open " + std::to_string(code));
  zip_stat_t stat;
  if (zip_stat(archive, member.c_str(), 0, &stat) != 0) zip_failure(path, "no member " + member);
  std::string bytes(stat.size, '\0');
  zip_file_t* file = zip_fopen(archive, member.c_str(), 0);
  const zip_int64_t got = file ? zip_fread(file, bytes.data(), bytes.size()) : -1;
  if (file) zip_fclose(file);
  zip_discard(archive);
  if (got != static_cast<zip_int64_t>(bytes.size())) zip_failure(path, "short read of " + member);
  return bytes;
}

std::string read_binary(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_binary(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::filesystem::path yolo26n_checkpoint() {
  const std::filesystem::path path = std::filesystem::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  return std::filesystem::exists(path) ? path : std::filesystem::path();
}

void perturb_parameters(Yolo26Model& model) {
  int tensor = 0;
  for_each_conv(model, [&tensor](ConvSpec& conv) {
    for (const ParameterRef& parameter : conv_parameters(conv)) {
      ++tensor;
      std::vector<float>& values = *parameter.values;
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = float(values[i] * (1.0 + 0.03 * std::sin(0.37 * double(i) + tensor)) +
                          1e-3 * std::cos(0.11 * double(i) - tensor));
    }
    fold_batchnorm(conv);
  });
}

}  // namespace lab::test
