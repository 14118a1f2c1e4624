// Test helpers for the checkpoint tests: a tiny pickle assembler (opcodes by name, so a test reads like the
// pickle it builds), a zip writer over libzip (stored members), the path of the shared yolo26n.pt and a
// deterministic stand-in for training (every parameter of a model perturbed).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace lab {
struct Yolo26Model;
}

namespace lab::test {

class PickleBytes {
 public:
  PickleBytes& proto(int version);
  PickleBytes& op(char opcode);  // any single-byte opcode: '(' 't' 'R' 'b' 's' 'u' '}' ')' ']' 'N' '.' ...
  PickleBytes& global(const std::string& module, const std::string& name);
  PickleBytes& text(const std::string& s);  // BINUNICODE
  PickleBytes& integer(int64_t v);          // BININT / LONG1
  PickleBytes& real(double v);              // BINFLOAT
  PickleBytes& put(uint32_t index);         // LONG_BINPUT
  PickleBytes& get(uint32_t index);         // LONG_BINGET
  PickleBytes& raw(const std::string& bytes);
  // NEWOBJ of `module.name` with no args, then BUILD with the dict the caller pushes next; finish with
  // end_object() after the state dict is complete.
  PickleBytes& begin_object(const std::string& module, const std::string& name);
  PickleBytes& end_object() { return op('b'); }
  // _rebuild_parameter(_rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict()))
  PickleBytes& tensor(const std::string& storage_type, const std::string& key, int64_t numel, int64_t offset,
                      const std::vector<int64_t>& size, const std::vector<int64_t>& stride);
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::string str() const { return std::string(bytes_.begin(), bytes_.end()); }

 private:
  std::vector<uint8_t> bytes_;
};

// Writes a zip with the given members (stored, uncompressed).
void write_zip(const std::filesystem::path& path,
               const std::vector<std::pair<std::string, std::string>>& members);

// Replaces one member of an existing zip (stored, CRC recomputed).
void replace_zip_member(const std::filesystem::path& path, const std::string& member,
                        const std::string& bytes);

// Reads one member with libzip directly (independent of the loader).
std::string read_zip_member(const std::filesystem::path& path, const std::string& member);

std::string read_binary(const std::filesystem::path& path);
void write_binary(const std::filesystem::path& path, const std::string& bytes);

// ../shared/assets/models/yolo26n.pt, or empty when the assets are absent.
std::filesystem::path yolo26n_checkpoint();

// Each checkpoint parameter of every conv (conv.weight, bn.weight, bn.bias; weight, bias) scaled and shifted
// by a few percent, differently per element and per tensor, then the BatchNorm refolded: what training
// leaves.
void perturb_parameters(Yolo26Model& model);

}  // namespace lab::test
