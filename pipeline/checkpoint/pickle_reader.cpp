// The restricted pickle VM: an iterative opcode loop over a bounds-checked byte reader, a value arena, the
// global allow-list and the constructors REDUCE / NEWOBJ may "call" (which only build PickleValues).
#include "pipeline/checkpoint/pickle_reader.hpp"

#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

// Storage classes torch.save names in persistent ids, with their dtype and element size.
struct StorageType {
  const char* dtype;
  size_t element_bytes;
};
const std::map<std::string, StorageType>& storage_types() {
  static const std::map<std::string, StorageType> types = {
      {"torch.HalfStorage", {"F16", 2}},      {"torch.FloatStorage", {"F32", 4}},
      {"torch.BFloat16Storage", {"BF16", 2}}, {"torch.DoubleStorage", {"F64", 8}},
      {"torch.LongStorage", {"I64", 8}},      {"torch.IntStorage", {"I32", 4}},
      {"torch.ShortStorage", {"I16", 2}},     {"torch.CharStorage", {"I8", 1}},
      {"torch.ByteStorage", {"U8", 1}},       {"torch.BoolStorage", {"BOOL", 1}}};
  return types;
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The allow-list. Anything not named here is rejected at the GLOBAL opcode, before it can be used.
std::optional<GlobalRole> classify_global(const std::string& qualified) {
  static const std::map<std::string, GlobalRole> exact = {
      {"collections.OrderedDict", GlobalRole::Dict},
      {"builtins.dict", GlobalRole::Dict},
      {"builtins.set", GlobalRole::Set},
      {"builtins.frozenset", GlobalRole::Set},
      {"torch._utils._rebuild_tensor", GlobalRole::RebuildTensor},
      {"torch._utils._rebuild_tensor_v2", GlobalRole::RebuildTensor},
      {"torch._utils._rebuild_parameter", GlobalRole::RebuildParameter},
      {"torch._utils._rebuild_parameter_with_state", GlobalRole::RebuildParameter},
      // Pure data that training metadata may hold; recorded as opaque objects.
      {"builtins.slice", GlobalRole::GenericClass},
      {"builtins.complex", GlobalRole::GenericClass},
      {"_codecs.encode", GlobalRole::GenericClass},
      {"argparse.Namespace", GlobalRole::GenericClass},
      {"types.SimpleNamespace", GlobalRole::GenericClass},
      {"ultralytics.utils.IterableSimpleNamespace", GlobalRole::GenericClass},
      {"pathlib.PosixPath", GlobalRole::GenericClass},
      {"pathlib.WindowsPath", GlobalRole::GenericClass},
      {"pathlib.PurePosixPath", GlobalRole::GenericClass},
      {"pathlib.PureWindowsPath", GlobalRole::GenericClass},
      {"datetime.datetime", GlobalRole::GenericClass},
      {"datetime.date", GlobalRole::GenericClass},
      {"datetime.timedelta", GlobalRole::GenericClass},
      {"numpy.dtype", GlobalRole::GenericClass},
      {"numpy.ndarray", GlobalRole::GenericClass},
      {"numpy.core.multiarray.scalar", GlobalRole::GenericClass},
      {"numpy.core.multiarray._reconstruct", GlobalRole::GenericClass},
      {"numpy._core.multiarray.scalar", GlobalRole::GenericClass},
      {"numpy._core.multiarray._reconstruct", GlobalRole::GenericClass},
      {"torch.device", GlobalRole::GenericClass},
      {"torch.Size", GlobalRole::GenericClass},
  };
  static const std::set<std::string> dtypes = {
      "torch.float16", "torch.half",   "torch.float32", "torch.float", "torch.bfloat16",
      "torch.float64", "torch.double", "torch.int64",   "torch.long",  "torch.int32",
      "torch.int",     "torch.int16",  "torch.int8",    "torch.uint8", "torch.bool"};
  if (auto it = exact.find(qualified); it != exact.end()) return it->second;
  if (storage_types().count(qualified)) return GlobalRole::StorageType;
  if (dtypes.count(qualified)) return GlobalRole::DType;
  // Module classes are recorded, never instantiated.
  if (starts_with(qualified, "torch.nn.modules.") || starts_with(qualified, "ultralytics.nn."))
    return GlobalRole::GenericClass;
  return std::nullopt;
}

}  // namespace

std::string describe(const PickleValue& value) {
  switch (value.kind) {
    case PickleKind::None:
      return "None";
    case PickleKind::Bool:
      return "bool";
    case PickleKind::Int:
    case PickleKind::BigInt:
      return "int";
    case PickleKind::Float:
      return "float";
    case PickleKind::String:
      return "str";
    case PickleKind::Bytes:
      return "bytes";
    case PickleKind::Tuple:
      return "tuple";
    case PickleKind::List:
      return "list";
    case PickleKind::Dict:
      return "dict";
    case PickleKind::Set:
      return "set";
    case PickleKind::Global:
      return "global '" + value.text + "'";
    case PickleKind::Object:
      return "object '" + value.text + "'";
    case PickleKind::Storage:
      return "storage";
    case PickleKind::Tensor:
      return "tensor";
  }
  return "value";
}

// One run of the VM over one pickle.
class PickleMachine {
 public:
  PickleMachine(std::span<const uint8_t> bytes, const std::string& where, PickleDocument& document)
      : bytes_(bytes), where_(where), document_(document) {}

  PickleValue* run() {
    while (pos_ < bytes_.size()) {
      op_offset_ = pos_;
      const uint8_t op = bytes_[pos_++];
      if (op == '.') return pop();
      step(op);
    }
    throw UsageError(where_ + " offset " + std::to_string(bytes_.size()) +
                     ": missing STOP (the pickle ends without its STOP opcode)");
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw UsageError(where_ + " offset " + std::to_string(op_offset_) + ": " + message);
  }

  // --- bounds-checked reading -------------------------------------------------------------------------
  std::span<const uint8_t> take(uint64_t count) {
    if (count > bytes_.size() - pos_)
      fail("truncated: the opcode needs " + std::to_string(count) + " more bytes, " +
           std::to_string(bytes_.size() - pos_) + " remain");
    auto part = bytes_.subspan(pos_, static_cast<size_t>(count));
    pos_ += static_cast<size_t>(count);
    return part;
  }
  uint64_t read_le(size_t width) {
    auto part = take(width);
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint64_t{part[i]} << (8 * i);
    return value;
  }
  std::string read_text(uint64_t count) {
    auto part = take(count);
    return std::string(part.begin(), part.end());
  }
  std::string read_line() {
    for (size_t end = pos_; end < bytes_.size() && end - pos_ <= 1024; ++end)
      if (bytes_[end] == '\n') {
        std::string line(bytes_.begin() + pos_, bytes_.begin() + end);
        pos_ = end + 1;
        return line;
      }
    fail("truncated: GLOBAL needs a newline-terminated name");
  }

  // --- values, stack, marks, memo -----------------------------------------------------------------------
  PickleValue* make(PickleKind kind) {
    if (document_.values_.size() >= kMaxPickleValues)
      fail("more than " + std::to_string(kMaxPickleValues) + " objects (limit for a checkpoint pickle)");
    document_.values_.push_back(std::make_unique<PickleValue>());
    document_.values_.back()->kind = kind;
    return document_.values_.back().get();
  }
  void push(PickleValue* value) {
    if (stack_.size() >= kMaxPickleStack)
      fail("the stack exceeds " + std::to_string(kMaxPickleStack) + " entries");
    stack_.push_back(value);
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  PickleValue* pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    PickleValue* value = stack_.back();
    stack_.pop_back();
    return value;
  }
  PickleValue* top() {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<PickleValue*> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t base = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue*> items(stack_.begin() + static_cast<ptrdiff_t>(base), stack_.end());
    stack_.resize(base);
    return items;
  }
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("bad memo index " + std::to_string(index));
    push(it->second);
  }

  // --- constructors -------------------------------------------------------------------------------------
  PickleValue* make_int(std::span<const uint8_t> twos_complement, bool is_signed = true) {
    if (twos_complement.size() > 8) {
      PickleValue* big = make(PickleKind::BigInt);
      big->text.assign(twos_complement.begin(), twos_complement.end());
      return big;
    }
    uint64_t raw = 0;
    for (size_t i = 0; i < twos_complement.size(); ++i) raw |= uint64_t{twos_complement[i]} << (8 * i);
    const size_t bits = 8 * twos_complement.size();
    if (is_signed && bits > 0 && bits < 64 && (raw >> (bits - 1)) & 1) raw |= ~uint64_t{0} << bits;
    PickleValue* value = make(PickleKind::Int);
    value->integer = static_cast<int64_t>(raw);
    return value;
  }
  PickleValue* make_string(PickleKind kind, uint64_t length) {
    PickleValue* value = make(kind);
    value->text = read_text(length);
    return value;
  }
  PickleValue* make_sequence(PickleKind kind, std::vector<PickleValue*> items) {
    PickleValue* value = make(kind);
    value->items = std::move(items);
    return value;
  }
  void add_pairs(PickleValue* dict, const std::vector<PickleValue*>& flat) {
    if (dict->kind != PickleKind::Dict) fail("SETITEMS on a " + describe(*dict));
    if (flat.size() % 2 != 0) fail("SETITEMS with an odd number of items");
    for (size_t i = 0; i < flat.size(); i += 2) dict->entries.emplace_back(flat[i], flat[i + 1]);
  }
  PickleValue* global(const std::string& module_name, const std::string& name) {
    const std::string module = module_name == "__builtin__" ? "builtins" : module_name;
    const std::string qualified = module + "." + name;
    const std::optional<GlobalRole> role = classify_global(qualified);
    if (!role) throw UsageError(where_ + ": unsupported class '" + qualified + "'");
    PickleValue* value = make(PickleKind::Global);
    value->text = qualified;
    value->role = *role;
    return value;
  }
  int64_t int_arg(const PickleValue* value, const char* what) {
    if (value->kind != PickleKind::Int)
      fail(std::string(what) + " is a " + describe(*value) + ", not an int");
    return value->integer;
  }
  std::vector<int64_t> int_tuple_arg(const PickleValue* value, const char* what) {
    if (value->kind != PickleKind::Tuple)
      fail(std::string(what) + " is a " + describe(*value) + ", not a tuple");
    std::vector<int64_t> ints;
    for (const PickleValue* item : value->items) ints.push_back(int_arg(item, what));
    return ints;
  }
  PickleValue* storage_from_persistent_id(const PickleValue* pid) {
    const auto& f = pid->items;
    if (pid->kind != PickleKind::Tuple || f.size() != 5 || f[0]->kind != PickleKind::String ||
        f[0]->text != "storage" || f[1]->kind != PickleKind::Global ||
        f[1]->role != GlobalRole::StorageType || f[2]->kind != PickleKind::String ||
        f[3]->kind != PickleKind::String || f[4]->kind != PickleKind::Int)
      fail("persistent id is not a ('storage', <storage type>, key, location, numel) tuple");
    if (f[4]->integer < 0) fail("storage '" + f[2]->text + "' has a negative element count");
    const StorageType& type = storage_types().at(f[1]->text);
    PickleValue* value = make(PickleKind::Storage);
    value->storage = std::make_unique<PickleStorage>(
        PickleStorage{type.dtype, type.element_bytes, f[2]->text, f[3]->text, f[4]->integer});
    return value;
  }
  // REDUCE / NEWOBJ of an allowed global: builds data, never calls anything.
  PickleValue* construct(const PickleValue* callable, const PickleValue* args) {
    if (callable->kind != PickleKind::Global) fail("cannot call a " + describe(*callable));
    if (args->kind != PickleKind::Tuple) fail("the arguments of '" + callable->text + "' are not a tuple");
    const auto& a = args->items;
    switch (callable->role) {
      case GlobalRole::Dict: {
        PickleValue* dict = make(PickleKind::Dict);
        if (a.empty()) return dict;
        if (a.size() != 1 || (a[0]->kind != PickleKind::List && a[0]->kind != PickleKind::Tuple))
          fail("'" + callable->text + "' takes no arguments or one list of pairs");
        for (const PickleValue* pair : a[0]->items) {
          if (pair->kind != PickleKind::Tuple || pair->items.size() != 2)
            fail("'" + callable->text + "' item is not a (key, value) pair");
          dict->entries.emplace_back(pair->items[0], pair->items[1]);
        }
        return dict;
      }
      case GlobalRole::Set: {
        PickleValue* set = make(PickleKind::Set);
        if (a.empty()) return set;
        if (a.size() != 1 || (a[0]->kind != PickleKind::List && a[0]->kind != PickleKind::Tuple &&
                              a[0]->kind != PickleKind::Set))
          fail("'" + callable->text + "' takes no arguments or one sequence");
        set->items = a[0]->items;
        return set;
      }
      case GlobalRole::RebuildTensor: {
        const bool v2 = callable->text.ends_with("_v2");
        if (v2 ? (a.size() != 6 && a.size() != 7) : a.size() != 4)
          fail("'" + callable->text + "' called with " + std::to_string(a.size()) + " arguments");
        if (a[0]->kind != PickleKind::Storage)
          fail("tensor storage is a " + describe(*a[0]) + ", not a storage");
        auto tensor = std::make_unique<PickleTensor>();
        tensor->storage = a[0];
        tensor->storage_offset = int_arg(a[1], "tensor storage offset");
        tensor->size = int_tuple_arg(a[2], "tensor size");
        tensor->stride = int_tuple_arg(a[3], "tensor stride");
        if (tensor->size.size() != tensor->stride.size())
          fail("tensor size and stride have different lengths");
        PickleValue* value = make(PickleKind::Tensor);
        value->tensor = std::move(tensor);
        return value;
      }
      case GlobalRole::RebuildParameter:
        if (a.empty() || a[0]->kind != PickleKind::Tensor)
          fail("'" + callable->text + "' needs a tensor as its first argument");
        return a[0];
      case GlobalRole::StorageType:
      case GlobalRole::DType:
        fail("'" + callable->text + "' cannot be called");
      case GlobalRole::GenericClass: {
        PickleValue* object = make(PickleKind::Object);
        object->text = callable->text;
        object->items = a;
        return object;
      }
    }
    fail("'" + callable->text + "' cannot be called");
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t protocol = read_le(1);
        if (protocol < 2 || protocol > 5) fail("unsupported pickle protocol " + std::to_string(protocol));
        return;
      }
      case 0x95:
        read_le(8);
        return;  // FRAME: a framing hint only
      case '(':  // MARK
        if (marks_.size() >= kMaxPickleMarks)
          fail("MARKs nested deeper than " + std::to_string(kMaxPickleMarks));
        marks_.push_back(stack_.size());
        return;
      case 'N':
        push(make(PickleKind::None));
        return;
      case 0x88:
      case 0x89: {  // NEWTRUE / NEWFALSE
        PickleValue* value = make(PickleKind::Bool);
        value->boolean = op == 0x88;
        push(value);
        return;
      }
      case 'J':
        push(make_int(take(4)));
        return;  // BININT
      case 'K':
        push(make_int(take(1), false));
        return;  // BININT1 (unsigned)
      case 'M':
        push(make_int(take(2), false));
        return;  // BININT2 (unsigned)
      case 0x8a:
        push(make_int(take(read_le(1))));
        return;     // LONG1
      case 0x8b: {  // LONG4
        const int64_t n = static_cast<int32_t>(read_le(4));
        if (n < 0) fail("LONG4 with a negative length");
        push(make_int(take(static_cast<uint64_t>(n))));
        return;
      }
      case 'G': {  // BINFLOAT, big-endian
        auto part = take(8);
        uint64_t raw = 0;
        for (uint8_t b : part) raw = (raw << 8) | b;
        PickleValue* value = make(PickleKind::Float);
        value->real = std::bit_cast<double>(raw);
        push(value);
        return;
      }
      case 'X':
        push(make_string(PickleKind::String, read_le(4)));
        return;  // BINUNICODE
      case 0x8c:
        push(make_string(PickleKind::String, read_le(1)));
        return;  // SHORT_BINUNICODE
      case 0x8d:
        push(make_string(PickleKind::String, read_le(8)));
        return;  // BINUNICODE8
      case 'U':
        push(make_string(PickleKind::String, read_le(1)));
        return;    // SHORT_BINSTRING
      case 'T': {  // BINSTRING
        const int64_t n = static_cast<int32_t>(read_le(4));
        if (n < 0) fail("BINSTRING with a negative length");
        push(make_string(PickleKind::String, static_cast<uint64_t>(n)));
        return;
      }
      case 'C':
        push(make_string(PickleKind::Bytes, read_le(1)));
        return;  // SHORT_BINBYTES
      case 'B':
        push(make_string(PickleKind::Bytes, read_le(4)));
        return;   // BINBYTES
      case 0x8e:  // BINBYTES8
      case 0x96:
        push(make_string(PickleKind::Bytes, read_le(8)));
        return;  // BYTEARRAY8
      case ')':
        push(make(PickleKind::Tuple));
        return;
      case 't':
        push(make_sequence(PickleKind::Tuple, pop_mark()));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<PickleValue*> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(make_sequence(PickleKind::Tuple, std::move(items)));
        return;
      }
      case ']':
        push(make(PickleKind::List));
        return;
      case 'l':
        push(make_sequence(PickleKind::List, pop_mark()));
        return;
      case 'a': {  // APPEND
        PickleValue* value = pop();
        PickleValue* list = top();
        if (list->kind != PickleKind::List) fail("APPEND to a " + describe(*list));
        list->items.push_back(value);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<PickleValue*> items = pop_mark();
        PickleValue* list = top();
        if (list->kind != PickleKind::List) fail("APPENDS to a " + describe(*list));
        list->items.insert(list->items.end(), items.begin(), items.end());
        return;
      }
      case '}':
        push(make(PickleKind::Dict));
        return;
      case 'd': {  // DICT
        PickleValue* dict = make(PickleKind::Dict);
        add_pairs(dict, pop_mark());
        push(dict);
        return;
      }
      case 's': {  // SETITEM
        PickleValue* value = pop();
        PickleValue* key = pop();
        add_pairs(top(), {key, value});
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<PickleValue*> flat = pop_mark();
        add_pairs(top(), flat);
        return;
      }
      case 0x8f:
        push(make(PickleKind::Set));
        return;     // EMPTY_SET
      case 0x90: {  // ADDITEMS
        std::vector<PickleValue*> items = pop_mark();
        PickleValue* set = top();
        if (set->kind != PickleKind::Set) fail("ADDITEMS to a " + describe(*set));
        set->items.insert(set->items.end(), items.begin(), items.end());
        return;
      }
      case 0x91:
        push(make_sequence(PickleKind::Set, pop_mark()));
        return;  // FROZENSET
      case '0':  // POP
        if (stack_.size() > floor()) {
          stack_.pop_back();
        } else if (!marks_.empty()) {
          marks_.pop_back();
        } else {
          fail("stack underflow");
        }
        return;
      case '1':
        pop_mark();
        return;  // POP_MARK
      case '2':
        push(top());
        return;    // DUP
      case 'c': {  // GLOBAL
        const std::string module = read_line();
        const std::string name = read_line();
        push(global(module, name));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        PickleValue* name = pop();
        PickleValue* module = pop();
        if (module->kind != PickleKind::String || name->kind != PickleKind::String)
          fail("STACK_GLOBAL needs two strings");
        push(global(module->text, name->text));
        return;
      }
      case 'R': {  // REDUCE
        PickleValue* args = pop();
        PickleValue* callable = pop();
        push(construct(callable, args));
        return;
      }
      case 0x81: {  // NEWOBJ
        PickleValue* args = pop();
        PickleValue* cls = pop();
        push(construct(cls, args));
        return;
      }
      case 0x92: {  // NEWOBJ_EX: keyword arguments are recorded nowhere (allowed classes take none that
                    // matter)
        pop();
        PickleValue* args = pop();
        PickleValue* cls = pop();
        push(construct(cls, args));
        return;
      }
      case 'b': {  // BUILD
        PickleValue* state = pop();
        PickleValue* target = top();
        if (target->kind != PickleKind::Object && target->kind != PickleKind::Dict)
          fail("BUILD on a " + describe(*target));
        target->state = state;
        return;
      }
      case 'Q':
        push(storage_from_persistent_id(pop()));
        return;  // BINPERSID
      case 'h':
        memo_get(read_le(1));
        return;  // BINGET
      case 'j':
        memo_get(read_le(4));
        return;  // LONG_BINGET
      case 'q':
        memo_put(read_le(1));
        return;  // BINPUT
      case 'r':
        memo_put(read_le(4));
        return;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        return;  // MEMOIZE
      default: {
        static const char* digits = "0123456789abcdef";
        fail(std::string("unsupported pickle opcode 0x") + digits[op >> 4] + digits[op & 15]);
      }
    }
  }

  std::span<const uint8_t> bytes_;
  const std::string& where_;
  PickleDocument& document_;
  size_t pos_ = 0, op_offset_ = 0;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue*> memo_;
};

PickleDocument PickleDocument::parse(std::span<const uint8_t> bytes, const std::string& where) {
  PickleDocument document;
  PickleMachine machine(bytes, where, document);
  document.root_ = machine.run();
  return document;
}

}  // namespace lab
