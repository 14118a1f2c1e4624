// PickleWriter: the opcode bytes of the Python pickle format (Lib/pickletools.py documents each).
#include "pipeline/checkpoint/pickle_writer.hpp"

#include <bit>
#include <limits>

namespace lab {

PickleWriter::PickleWriter() {
  op(0x80);
  bytes_.push_back(2);
}

PickleWriter& PickleWriter::op(uint8_t opcode) {
  bytes_.push_back(opcode);
  return *this;
}

void PickleWriter::little_endian(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

PickleWriter& PickleWriter::none() {
  return op('N');
}
PickleWriter& PickleWriter::boolean(bool value) {
  return op(value ? 0x88 : 0x89);
}

PickleWriter& PickleWriter::integer(int64_t value) {
  if (value >= 0 && value < 256) {
    op('K');
    little_endian(static_cast<uint64_t>(value), 1);
  } else if (value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max()) {
    op('J');
    little_endian(static_cast<uint64_t>(value), 4);
  } else {
    op(0x8a);  // LONG1: a length byte, then that many bytes of two's complement, little-endian
    bytes_.push_back(8);
    little_endian(static_cast<uint64_t>(value), 8);
  }
  return *this;
}

PickleWriter& PickleWriter::real(double value) {
  op('G');  // BINFLOAT: 8 bytes, big-endian
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  for (int i = 7; i >= 0; --i) bytes_.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  return *this;
}

PickleWriter& PickleWriter::text(const std::string& utf8) {
  op('X');  // BINUNICODE: a 4-byte little-endian length, then UTF-8
  little_endian(utf8.size(), 4);
  bytes_.insert(bytes_.end(), utf8.begin(), utf8.end());
  return *this;
}

PickleWriter& PickleWriter::global(const std::string& module, const std::string& name) {
  op('c');
  bytes_.insert(bytes_.end(), module.begin(), module.end());
  bytes_.push_back('\n');
  bytes_.insert(bytes_.end(), name.begin(), name.end());
  bytes_.push_back('\n');
  return *this;
}

PickleWriter& PickleWriter::mark() {
  return op('(');
}
PickleWriter& PickleWriter::empty_dict() {
  return op('}');
}
PickleWriter& PickleWriter::empty_list() {
  return op(']');
}
PickleWriter& PickleWriter::empty_tuple() {
  return op(')');
}
PickleWriter& PickleWriter::set_items() {
  return op('u');
}
PickleWriter& PickleWriter::appends() {
  return op('e');
}
PickleWriter& PickleWriter::tuple() {
  return op('t');
}
PickleWriter& PickleWriter::reduce() {
  return op('R');
}
PickleWriter& PickleWriter::persistent_id() {
  return op('Q');
}

std::vector<uint8_t> PickleWriter::finish() {
  op('.');
  return std::move(bytes_);
}

}  // namespace lab
