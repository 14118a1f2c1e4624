// The restricted pickle VM and the .pt loader on hand-assembled inputs: opcode coverage, rejected opcodes and
// classes (os.system is refused, never run), stack underflow, bad memo, missing STOP, nesting and
// object-count bombs, and synthetic checkpoints for strided views, dtypes, ema vs model, names forms and
// every storage error.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include <unistd.h>

#include "tests/checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/checkpoint/pickle_reader.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::PickleDocument;
using lab::PickleKind;
using lab::UsageError;
using lab::test::PickleBytes;
using namespace std::string_literals;

namespace {

PickleDocument parse(const std::string& bytes) {
  const std::vector<uint8_t> data(bytes.begin(), bytes.end());
  return PickleDocument::parse(data, "t.pt: t/data.pkl");
}

std::string pickle_error(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// A torch module object: NEWOBJ + BUILD with {'_parameters': {...}, '_buffers': {...}, '_modules': {...}}
// plus `extra` (already-encoded key/value pairs for the state dict).
struct ModuleSpec {
  std::string module = "torch.nn.modules.conv", name = "Conv2d";
  std::vector<std::pair<std::string, std::function<void(PickleBytes&)>>> parameters, buffers, modules, extra;
};

void write_module(PickleBytes& p, const ModuleSpec& m) {
  p.begin_object(m.module, m.name).op('}').op('(');
  p.text("training").raw("\x89");
  const std::pair<const char*, const decltype(m.parameters)*> sections[] = {
      {"_parameters", &m.parameters}, {"_buffers", &m.buffers}, {"_modules", &m.modules}};
  for (const auto& [section, entries] : sections) {
    p.text(section).global("collections", "OrderedDict").op(')').op('R');
    if (!entries->empty()) {
      p.op('(');
      for (const auto& [key, write] : *entries) {
        p.text(key);
        write(p);
      }
      p.op('u');
    }
  }
  for (const auto& [key, write] : m.extra) {
    p.text(key);
    write(p);
  }
  p.op('u').end_object();
}

std::function<void(PickleBytes&)> tensor(const std::string& type, const std::string& key, int64_t numel,
                                         int64_t offset, std::vector<int64_t> size,
                                         std::vector<int64_t> stride) {
  return [=](PickleBytes& p) { p.tensor(type, key, numel, offset, size, stride); };
}

std::function<void(PickleBytes&)> module(ModuleSpec spec) {
  return [spec](PickleBytes& p) { write_module(p, spec); };
}

// {'model': <DetectionModel with `model.0` = Conv2d holding `weight`>, ...extra top-level entries}
std::string checkpoint_pickle(const std::function<void(PickleBytes&)>& weight,
                              const std::string& model_key = "model",
                              const std::function<void(PickleBytes&)>& names = nullptr,
                              bool with_yaml = true) {
  ModuleSpec conv;
  conv.parameters = {{"weight", weight}, {"bias", [](PickleBytes& p) { p.op('N'); }}};
  ModuleSpec sequential{"torch.nn.modules.container", "Sequential"};
  sequential.modules = {{"0", module(conv)}};
  ModuleSpec model{"ultralytics.nn.tasks", "DetectionModel"};
  model.modules = {{"model", module(sequential)}};
  if (with_yaml)
    model.extra.push_back({"yaml", [](PickleBytes& p) {
                             p.op('}').op('(').text("nc").integer(2).text("scale").text("s").text("depth");
                             p.real(0.5).op('u');
                           }});
  const std::function<void(PickleBytes&)> default_names = [](PickleBytes& p) {
    p.op('}').op('(').integer(0).text("cat").integer(1).text("dog").op('u');
  };
  model.extra.push_back({"names", names ? names : default_names});
  PickleBytes p;
  p.proto(2).op('}').op('(').text("epoch").integer(-1);
  if (model_key != "model") p.text("model").op('N');
  p.text(model_key);
  write_module(p, model);
  p.op('u').op('.');
  return p.str();
}

std::string halves(std::initializer_list<uint16_t> values) {
  std::string bytes;
  for (uint16_t v : values) bytes += std::string{static_cast<char>(v & 255), static_cast<char>(v >> 8)};
  return bytes;
}

lab::Checkpoint load_zip(const fs::path& path, const std::string& pickle,
                         std::vector<std::pair<std::string, std::string>> storages) {
  std::vector<std::pair<std::string, std::string>> members = {{"arc/data.pkl", pickle},
                                                              {"arc/byteorder", "little"}};
  for (auto& [key, bytes] : storages) members.push_back({"arc/data/" + key, bytes});
  lab::test::write_zip(path, members);
  return lab::load_checkpoint(path);
}

std::string load_error(const fs::path& path, const std::string& pickle,
                       std::vector<std::pair<std::string, std::string>> storages) {
  try {
    load_zip(path, pickle, std::move(storages));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("pickle VM builds values from protocol 2-5 opcodes", "[checkpoint]") {
  // Protocol 4: FRAME, SHORT_BINUNICODE + MEMOIZE, EMPTY_LIST + APPENDS, LONG1 (negative), BINFLOAT,
  // TUPLE2, EMPTY_SET + ADDITEMS, BINBYTES, NEWTRUE, BINGET of a memoized value, DICT, STOP.
  const std::string bytes = "\x80\x04\x95"s + "\x40\0\0\0\0\0\0\0"s + "(" +
                            "\x8c\x01"
                            "k"
                            "\x94" +
                            "]\x94(K\x01M\xe8\x03J\xff\xff\xff\xff\x8a\x02\x00\x80"s + "e" +
                            "\x8c\x01"
                            "f" +
                            "G\x3f\xf8\0\0\0\0\0\0"s +
                            "\x8c\x01"
                            "t" +
                            "K\x07\x88\x86" +
                            "\x8c\x01"
                            "s" +
                            "\x8f(C\x02\x00\x01\x90"s +
                            "\x8c\x01"
                            "g" +
                            "h\x01" + "d.";
  const PickleDocument doc = parse(bytes);
  const lab::PickleValue& root = doc.root();
  REQUIRE(root.kind == PickleKind::Dict);
  const lab::PickleValue* list = root.find("k");
  REQUIRE(list != nullptr);
  REQUIRE(list->kind == PickleKind::List);
  REQUIRE(list->items.size() == 4);
  CHECK(list->items[0]->integer == 1);
  CHECK(list->items[1]->integer == 1000);
  CHECK(list->items[2]->integer == -1);
  CHECK(list->items[3]->integer == -32768);
  CHECK(root.find("f")->real == 1.5);
  const lab::PickleValue* tuple = root.find("t");
  REQUIRE(tuple->kind == PickleKind::Tuple);
  CHECK(tuple->items[0]->integer == 7);
  CHECK(tuple->items[1]->boolean);
  REQUIRE(root.find("s")->kind == PickleKind::Set);
  CHECK(root.find("s")->items[0]->kind == PickleKind::Bytes);
  CHECK(root.find("g") == list);  // memo references share the value
}

TEST_CASE("pickle VM rejects unknown opcodes with their offset", "[checkpoint]") {
  CHECK(pickle_error(std::string("\x80\x02N\xff.", 5)) ==
        "t.pt: t/data.pkl offset 3: unsupported pickle opcode 0xff");
  // Text-protocol opcodes (INT, GET, INST, PERSID) and extension codes are not part of what torch.save emits.
  CHECK_THAT(pickle_error("\x80\x02I1\n."), Catch::Contains("unsupported pickle opcode 0x49"));
  CHECK_THAT(pickle_error("\x80\x02g0\n."), Catch::Contains("unsupported pickle opcode 0x67"));
  CHECK_THAT(pickle_error("\x80\x02\x82\x01."), Catch::Contains("unsupported pickle opcode 0x82"));
  CHECK_THAT(pickle_error("\x80\x09N."), Catch::Contains("unsupported pickle protocol 9"));
}

TEST_CASE("pickle VM refuses classes off the allow-list and never runs them", "[checkpoint]") {
  const fs::path marker = fs::temp_directory_path() / ("lab-pickle-pwned-" + std::to_string(::getpid()));
  fs::remove(marker);
  PickleBytes p;
  p.proto(2).global("os", "system").text("touch " + marker.string()).raw("\x85").op('R').op('.');
  CHECK(pickle_error(p.str()) == "t.pt: t/data.pkl: unsupported class 'os.system'");
  PickleBytes posix;
  posix.proto(2).global("posix", "system").op('.');
  CHECK(pickle_error(posix.str()) == "t.pt: t/data.pkl: unsupported class 'posix.system'");
  PickleBytes stack_global;  // protocol 4 STACK_GLOBAL goes through the same check
  stack_global.proto(4).raw(
      "\x8c\x08"
      "builtins\x8c\x04"
      "eval\x93.");
  CHECK(pickle_error(stack_global.str()) == "t.pt: t/data.pkl: unsupported class 'builtins.eval'");
  CHECK_FALSE(fs::exists(marker));
  // Allowed classes are recorded as objects, not instantiated; storage types cannot be called.
  PickleBytes obj;
  obj.proto(2).global("torch.nn.modules.conv", "Conv2d").integer(3).raw("\x85").op('R').op('.');
  const PickleDocument doc = parse(obj.str());
  CHECK(doc.root().kind == PickleKind::Object);
  CHECK(doc.root().text == "torch.nn.modules.conv.Conv2d");
  CHECK(doc.root().items.at(0)->integer == 3);
  PickleBytes call_storage;
  call_storage.proto(2).global("torch", "HalfStorage").op(')').op('R').op('.');
  CHECK_THAT(pickle_error(call_storage.str()), Catch::Contains("'torch.HalfStorage' cannot be called"));
}

TEST_CASE("pickle VM reports underflow, bad memo, missing STOP and truncation", "[checkpoint]") {
  CHECK(pickle_error("\x80\x02\x85.") == "t.pt: t/data.pkl offset 2: stack underflow");
  CHECK(pickle_error("\x80\x02.") == "t.pt: t/data.pkl offset 2: stack underflow");
  CHECK(pickle_error("\x80\x02(N\x86.") == "t.pt: t/data.pkl offset 4: stack underflow");  // below the MARK
  CHECK(pickle_error("\x80\x02h\x05.") == "t.pt: t/data.pkl offset 2: bad memo index 5");
  CHECK(pickle_error("\x80\x02N") ==
        "t.pt: t/data.pkl offset 3: missing STOP (the pickle ends without its STOP opcode)");
  CHECK(pickle_error("") ==
        "t.pt: t/data.pkl offset 0: missing STOP (the pickle ends without its STOP opcode)");
  CHECK_THAT(pickle_error("\x80\x02X\xff\0\0\0ab."s), Catch::Contains("offset 2: truncated"));
  CHECK_THAT(pickle_error("\x80\x02t."), Catch::Contains("no MARK to pop to"));
  CHECK_THAT(pickle_error("\x80\x02NNa."), Catch::Contains("APPEND to a None"));
  CHECK_THAT(pickle_error("\x80\x02"
                          "cos\n"),
             Catch::Contains("truncated: GLOBAL"));
}

TEST_CASE("pickle VM limits nesting, stack and object count", "[checkpoint]") {
  CHECK_THAT(pickle_error("\x80\x02" + std::string(20000, '(')),
             Catch::Contains("MARKs nested deeper than 10000"));
  CHECK_THAT(pickle_error("\x80\x02" + std::string(1'100'000, ']')), Catch::Contains("the stack exceeds"));
  std::string churn = "\x80\x02";
  for (int i = 0; i < 2'100'000; ++i) churn += "N0";
  CHECK_THAT(pickle_error(churn), Catch::Contains("more than 2000000 objects"));
}

TEST_CASE("deeply nested or exponentially shared model.yaml is refused, not recursed", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-bomb");
  auto weight = tensor("HalfStorage", "0", 2, 0, {2}, {1});
  // {'x': 5000 nested lists}: }X..]]]...]aaa...as
  auto deep = [](PickleBytes& p) {
    p.op('}').text("x");
    p.raw(std::string(5000, ']'));
    p.raw(std::string(4999, 'a'));
    p.op('s');
  };
  ModuleSpec conv;
  conv.parameters = {{"weight", weight}};
  ModuleSpec model{"ultralytics.nn.tasks", "DetectionModel"};
  model.modules = {{"model", module(conv)}};
  model.extra = {{"yaml", deep}};
  PickleBytes p;
  p.proto(2).op('}').text("model");
  write_module(p, model);
  p.op('s').op('.');
  CHECK_THAT(load_error(dir.path / "deep.pt", p.str(), {{"0", halves({0x3c00, 0x4000})}}),
             Catch::Contains("model.yaml is nested deeper than 100"));

  // L0 = []; L(i+1) = [Li, Li]: 2^60 paths through 120 objects.
  auto shared = [](PickleBytes& p) {
    p.op(']').put(1000).op('0');
    for (int i = 0; i < 60; ++i) p.op(']').op('(').get(1000 + i).get(1000 + i).op('e').put(1001 + i).op('0');
    p.get(1060);
  };
  model.extra = {{"yaml", [&](PickleBytes& q) {
                    q.op('}').text("x");
                    shared(q);
                    q.op('s');
                  }}};
  PickleBytes s;
  s.proto(2).op('}').text("model");
  write_module(s, model);
  s.op('s').op('.');
  CHECK_THAT(load_error(dir.path / "dag.pt", s.str(), {{"0", halves({0x3c00, 0x4000})}}),
             Catch::Contains("model.yaml has more than 1000000 values"));

  // Modules nested 200 deep.
  ModuleSpec chain = conv;
  for (int i = 0; i < 200; ++i) {
    ModuleSpec outer{"torch.nn.modules.container", "Sequential"};
    outer.modules = {{"m", module(chain)}};
    chain = outer;
  }
  PickleBytes c;
  c.proto(2).op('}').text("model");
  write_module(c, chain);
  c.op('s').op('.');
  CHECK_THAT(load_error(dir.path / "chain.pt", c.str(), {{"0", halves({0x3c00, 0x4000})}}),
             Catch::Contains("is nested deeper than 100"));
}

TEST_CASE("synthetic checkpoint: strided view, offset, names, yaml", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-synthetic");
  // weight = storage[1:7] viewed as [3, 2] with strides (1, 3): the transpose of a row-major [2, 3].
  const std::string storage = halves({0xffff, 0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x7bff});
  const auto c =
      load_zip(dir.path / "view.pt", checkpoint_pickle(tensor("HalfStorage", "5", 8, 1, {3, 2}, {1, 3})),
               {{"5", storage}});
  const lab::HostTensor& w = c.tensor("model.0.weight", {3, 2});
  CHECK(w.values == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(w.stored_dtype == "F16");
  CHECK_FALSE(c.contains("model.0.bias"));  // None parameters are not state
  CHECK(c.nc == 2);
  CHECK(c.class_names == std::vector<std::string>{"cat", "dog"});
  CHECK(c.scale == "s");
  CHECK(c.yaml_json == R"({"depth":0.5,"nc":2,"scale":"s"})");
}

TEST_CASE("synthetic checkpoint: dtypes, ema preference, names list, integer buffers", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-dtypes-pt");
  std::string f32(8, '\0');
  const float pair[2] = {0.25f, -8.5f};
  std::memcpy(f32.data(), pair, 8);
  auto names_list = [](PickleBytes& p) { p.op(']').op('(').text("cat").text("dog").op('e'); };
  const auto c = load_zip(dir.path / "f32.pt",
                          checkpoint_pickle(tensor("FloatStorage", "0", 2, 0, {2}, {1}), "ema", names_list),
                          {{"0", f32}});
  CHECK(c.tensor("model.0.weight").values == std::vector<float>{0.25f, -8.5f});
  CHECK(c.tensor("model.0.weight").stored_dtype == "F32");
  CHECK(c.class_names[1] == "dog");

  const auto bf =
      load_zip(dir.path / "bf16.pt", checkpoint_pickle(tensor("BFloat16Storage", "0", 1, 0, {}, {})),
               {{"0", halves({0xc049})}});
  CHECK(bf.tensor("model.0.weight").values == std::vector<float>{-3.140625f});
  CHECK(bf.tensor("model.0.weight").shape.empty());

  // No yaml, no names: nc from the head is impossible here (no cv3), so the error names the cause.
  CHECK_THAT(load_error(dir.path / "nonc.pt",
                        checkpoint_pickle(
                            tensor("HalfStorage", "0", 1, 0, {1}, {1}), "model",
                            [](PickleBytes& p) { p.op('N'); }, false),
                        {{"0", halves({0})}}),
             Catch::Contains("cannot tell the number of classes"));
  // Only an integer tensor: no float state.
  CHECK_THAT(load_error(dir.path / "ints.pt", checkpoint_pickle(tensor("LongStorage", "0", 1, 0, {}, {})),
                        {{"0", std::string(8, '\0')}}),
             Catch::Contains("no floating-point state-dict tensors"));
}

TEST_CASE("synthetic checkpoint errors name the file and the member or key", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-errors");
  const fs::path pt = dir.path / "bad.pt";
  const auto w = [](int64_t numel, int64_t offset, std::vector<int64_t> size, std::vector<int64_t> stride) {
    return checkpoint_pickle(tensor("HalfStorage", "0", numel, offset, size, stride));
  };
  CHECK(load_error(pt, w(4, 0, {4}, {1}), {}) == pt.string() + ": missing archive member 'arc/data/0'");
  CHECK_THAT(load_error(pt, w(4, 0, {4}, {1}), {{"0", halves({1, 2, 3})}}),
             Catch::Contains("member 'arc/data/0' has 6 bytes but its storage of 4 F16 elements needs 8"));
  CHECK_THAT(load_error(pt, w(4, 1, {4}, {1}), {{"0", halves({1, 2, 3, 4})}}),
             Catch::Contains(pt.string() + ": tensor 'model.0.weight': the view"));
  CHECK_THAT(load_error(pt, w(4, 0, {2, 2}, {5, 1}), {{"0", halves({1, 2, 3, 4})}}),
             Catch::Contains("runs past storage"));
  CHECK_THAT(load_error(pt, w(1'000'000'000'000, 0, {1}, {1}), {{"0", halves({1})}}),
             Catch::Contains("storage of 1000000000000 F16 elements needs 2000000000000"));
  CHECK_THAT(load_error(pt, w(4, 0, {1'000'000, 1'000'000}, {1'000'000, 1}), {{"0", halves({1, 2, 3, 4})}}),
             Catch::Contains("is too large"));
  CHECK_THAT(load_error(pt, w(4, 0, {-1}, {1}), {{"0", halves({1, 2, 3, 4})}}),
             Catch::Contains("negative size"));
  CHECK_THAT(load_error(pt, w(4, 0, {4}, {1, 1}), {{"0", halves({1, 2, 3, 4})}}),
             Catch::Contains("size and stride have different lengths"));

  // A dict without model / ema.
  PickleBytes no_model;
  no_model.proto(2).op('}').text("epoch").integer(3).op('s').op('.');
  CHECK(load_error(pt, no_model.str(), {}) ==
        pt.string() + ": no 'model' or 'ema' in the checkpoint (keys: epoch)");
  PickleBytes list_root;
  list_root.proto(2).op(']').op('.');
  CHECK_THAT(load_error(pt, list_root.str(), {}), Catch::Contains("not a dict"));

  // An archive without data.pkl.
  lab::test::write_zip(pt, {{"arc/other", "x"}});
  CHECK_THROWS_WITH(lab::load_checkpoint(pt), Catch::Contains("missing data.pkl"));
  lab::test::write_zip(
      pt, {{"arc/data.pkl", w(1, 0, {1}, {1})}, {"arc/byteorder", "big"}, {"arc/data/0", halves({1})}});
  CHECK_THROWS_WITH(lab::load_checkpoint(pt), Catch::Contains("only little-endian"));
}
