// A pickle (protocol 2) emitter for the torch state-dict files we write: opcodes by what they build, each one
// that torch.load(weights_only=True) accepts (PROTO, MARK, EMPTY_DICT/LIST/TUPLE, SETITEMS, APPENDS, TUPLE,
// GLOBAL, REDUCE, BINPERSID, BINUNICODE, BININT1/BININT/LONG1, BINFLOAT, NEWTRUE/NEWFALSE, NONE, STOP).
// Nothing is memoised: every value is written where it is used.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lab {

class PickleWriter {
 public:
  PickleWriter();  // PROTO 2

  PickleWriter& none();
  PickleWriter& boolean(bool value);
  PickleWriter& integer(int64_t value);
  PickleWriter& real(double value);
  PickleWriter& text(const std::string& utf8);
  PickleWriter& global(const std::string& module, const std::string& name);
  PickleWriter& mark();
  PickleWriter& empty_dict();
  PickleWriter& empty_list();
  PickleWriter& empty_tuple();
  PickleWriter& set_items();      // pops to the MARK: key, value, ... into the dict below it
  PickleWriter& appends();        // pops to the MARK: items appended to the list below it
  PickleWriter& tuple();          // pops to the MARK: a tuple of the items
  PickleWriter& reduce();         // callable, argument tuple -> call result
  PickleWriter& persistent_id();  // the tuple on top becomes a persistent id (torch: a storage reference)

  // STOP, and the bytes written.
  std::vector<uint8_t> finish();

 private:
  PickleWriter& op(uint8_t opcode);
  void little_endian(uint64_t value, int bytes);
  std::vector<uint8_t> bytes_;
};

}  // namespace lab
