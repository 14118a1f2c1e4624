// Checkpoint loading of the real yolo26n.pt (counts, shapes, dtype, names, nc, scale, BN identity values,
// a value check against an independent libzip + half decode), the safetensors round trip (bit-identical),
// a foreign safetensors state dict, and the tensor lookups' errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "tests/checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::Checkpoint;
using lab::UsageError;

namespace {

// Independent IEEE half decode (ldexp based), so the check does not share code with the loader.
float decode_half(uint16_t h) {
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
  if (exponent == 31) return mantissa ? NAN : static_cast<float>(sign * INFINITY);
  return static_cast<float>(sign * std::ldexp(1024 + mantissa, exponent - 25));
}

const Checkpoint& yolo26n() {
  static const Checkpoint checkpoint = lab::load_checkpoint(lab::test::yolo26n_checkpoint());
  return checkpoint;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("yolo26n.pt loads: tensors, shapes, dtype, names, nc, scale", "[checkpoint]") {
  if (lab::test::yolo26n_checkpoint().empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  const Checkpoint& c = yolo26n();
  // 708 state-dict entries, of which 114 are the integer BatchNorm num_batches_tracked counters (skipped).
  CHECK(c.state_dict.size() == 594);
  CHECK_FALSE(c.contains("model.0.bn.num_batches_tracked"));
  size_t values = 0;
  for (const auto& [key, t] : c.state_dict) {
    values += t.values.size();
    CHECK(t.values.size() == t.element_count());
    CHECK(t.stored_dtype == "F16");
  }
  CHECK(values == 2591848);
  CHECK(c.tensor("model.0.conv.weight").shape == std::vector<int64_t>{16, 3, 3, 3});
  CHECK(c.tensor("model.23.one2one_cv3.0.2.weight").shape == std::vector<int64_t>{80, 80, 1, 1});
  CHECK(c.tensor("model.23.cv2.0.2.weight").shape == std::vector<int64_t>{4, 16, 1, 1});
  CHECK(c.tensor("model.10.m.0.attn.qkv.conv.weight").shape == std::vector<int64_t>{256, 128, 1, 1});
  CHECK(c.nc == 80);
  REQUIRE(c.class_names.size() == 80);
  CHECK(c.class_names[0] == "person");
  CHECK(c.class_names[5] == "bus");
  CHECK(c.class_names[79] == "toothbrush");
  CHECK(c.scale == "n");
  CHECK(c.yaml_json.find("\"scale\":\"n\"") != std::string::npos);
  CHECK(c.yaml_json.find("\"end2end\":true") != std::string::npos);
  CHECK(c.path == lab::test::yolo26n_checkpoint());
}

TEST_CASE("yolo26n.pt BatchNorms are the identity the assets README states", "[checkpoint]") {
  if (lab::test::yolo26n_checkpoint().empty()) return;
  const Checkpoint& c = yolo26n();
  const float var = decode_half(0x3bfe);  // 1 - 1e-3 rounded to half: 0.9990234375
  REQUIRE(var == Approx(0.999).epsilon(1e-4));
  int checked = 0;
  for (const auto& [key, t] : c.state_dict) {
    const auto ends = [&key](const std::string& s) { return key.size() > s.size() && key.ends_with(s); };
    for (float v : t.values) {
      if (ends(".bn.weight")) CHECK(v == 1.0f);
      if (ends(".bn.running_mean")) CHECK(v == 0.0f);
      if (ends(".bn.running_var")) CHECK(v == var);
    }
    checked += ends(".bn.weight");
  }
  CHECK(checked == 114);
}

TEST_CASE("yolo26n.pt values match an independent decode of the storage bytes", "[checkpoint]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) return;
  // model.0.conv.weight is storage '0': 432 contiguous halves; model.22.m.0.1.attn.qkv.conv.weight is checked
  // too (a larger member elsewhere in the archive).
  const std::string raw = lab::test::read_zip_member(pt, "yolo26n/data/0");
  REQUIRE(raw.size() == 432 * 2);
  const auto& w = yolo26n().tensor("model.0.conv.weight").values;
  REQUIRE(w.size() == 432);
  for (size_t i = 0; i < w.size(); ++i) {
    const uint16_t h =
        static_cast<uint16_t>(static_cast<uint8_t>(raw[2 * i]) | static_cast<uint8_t>(raw[2 * i + 1]) << 8);
    REQUIRE(w[i] == decode_half(h));
  }
  CHECK(w[0] == -2.6015625f);
  CHECK(w[3] == -6.69140625f);
}

TEST_CASE("safetensors round trip is bit-identical and keeps F16 as F16", "[checkpoint]") {
  if (lab::test::yolo26n_checkpoint().empty()) return;
  lab::test::ScratchDir dir("ckpt-roundtrip");
  const fs::path out = dir.path / "yolo26n.safetensors";
  lab::save_checkpoint_safetensors(yolo26n(), out);
  // Only the final file is left: the temporary was renamed.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);

  const lab::SafetensorsFile raw = lab::SafetensorsFile::load(out);
  CHECK(raw.info("model.0.conv.weight").dtype == "F16");
  CHECK(raw.metadata().at("format") == "yolo26-kernel-lab");
  CHECK(raw.metadata().at("nc") == "80");
  CHECK(raw.metadata().at("scale") == "n");

  const Checkpoint back = lab::load_checkpoint(out);
  CHECK(back.path == out);
  CHECK(back.nc == 80);
  CHECK(back.scale == "n");
  CHECK(back.class_names == yolo26n().class_names);
  CHECK(back.yaml_json == yolo26n().yaml_json);
  REQUIRE(back.state_dict.size() == yolo26n().state_dict.size());
  for (const auto& [key, t] : yolo26n().state_dict) {
    INFO(key);
    REQUIRE(back.contains(key));
    const lab::HostTensor& b = back.tensor(key);
    CHECK(b.shape == t.shape);
    CHECK(b.stored_dtype == t.stored_dtype);
    CHECK(bit_identical(b.values, t.values));
  }
  // Its own F16 bytes equal the .pt storage bytes.
  const std::string pt_bytes = lab::test::read_zip_member(lab::test::yolo26n_checkpoint(), "yolo26n/data/0");
  const std::string st_bytes = lab::test::read_binary(out);
  const auto& info = raw.info("model.0.conv.weight");
  uint64_t header = 0;
  std::memcpy(&header, st_bytes.data(), 8);
  CHECK(st_bytes.substr(8 + header + info.begin, info.end - info.begin) == pt_bytes);
}

TEST_CASE("F32, BF16 and F64 tensors survive the round trip exactly, odd values included", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-dtypes");
  Checkpoint c;
  c.class_names = {"a", "b"};
  c.nc = 2;
  c.scale = "";
  c.yaml_json = "{}";
  const std::vector<float> halves = {0.0f,     -0.0f,     1.0f,     65504.0f,
                                     0x1p-24f, -0x1p-14f, INFINITY, 0.333251953125f};
  c.state_dict["h"] = {{2, 4}, halves, "F16"};
  c.state_dict["b"] = {{3}, {1.0f, -3.140625f, 0x1p-130f}, "BF16"};
  c.state_dict["f"] = {{2}, {0.1f, -1e-40f}, "F32"};
  c.state_dict["d"] = {{1}, {1.0f / 3.0f}, "F64"};
  const fs::path out = dir.path / "small.safetensors";
  lab::save_checkpoint_safetensors(c, out);
  const Checkpoint back = lab::load_checkpoint(out);
  for (const auto& [key, t] : c.state_dict) {
    INFO(key);
    CHECK(back.tensor(key).stored_dtype == t.stored_dtype);
    CHECK(bit_identical(back.tensor(key).values, t.values));
  }
  CHECK(back.class_names == c.class_names);
  CHECK(back.scale.empty());
}

TEST_CASE("a safetensors state dict without our metadata still loads", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-foreign");
  const fs::path file = dir.path / "foreign.safetensors";
  std::vector<lab::SafetensorsTensor> tensors = {
      lab::f32_tensor("model.23.cv3.0.2.weight", {7, 4, 1, 1}, std::vector<float>(28, 0.5f)),
      lab::f32_tensor("model.23.cv3.0.0.0.conv.weight", {4, 1, 3, 3}, std::vector<float>(36, 1.0f)),
      lab::SafetensorsTensor{"model.0.bn.num_batches_tracked", "I64", {}, std::vector<uint8_t>(8, 0)}};
  lab::write_safetensors(file, tensors);
  const Checkpoint c = lab::load_checkpoint(file);
  CHECK(c.nc == 7);
  REQUIRE(c.class_names.size() == 7);
  CHECK(c.class_names[6] == "class6");
  CHECK(c.state_dict.size() == 2);  // the integer counter is skipped
  CHECK(c.yaml_json == "{}");

  // No head tensor: nc from the metadata, else an error.
  const fs::path bare = dir.path / "bare.safetensors";
  lab::write_safetensors(bare, {lab::f32_tensor("x", {2}, {1, 2})}, {{"nc", "3"}});
  CHECK(lab::load_checkpoint(bare).nc == 3);
  lab::write_safetensors(bare, {lab::f32_tensor("x", {2}, {1, 2})});
  CHECK_THROWS_WITH(lab::load_checkpoint(bare), Catch::Contains("cannot tell the number of classes"));
}

TEST_CASE("tensor lookups name the file and the key", "[checkpoint]") {
  Checkpoint c;
  c.path = "m.safetensors";
  c.state_dict["w"] = {{2, 3}, std::vector<float>(6, 1.0f), "F32"};
  CHECK(c.tensor("w", {2, 3}).values.size() == 6);
  CHECK_THROWS_AS(c.tensor("v"), UsageError);
  CHECK_THROWS_WITH(c.tensor("v"), "m.safetensors: missing tensor 'v'");
  CHECK_THROWS_WITH(c.tensor("w", {3, 2}),
                    "m.safetensors: tensor 'w' has shape [2, 3] but the config needs [3, 2]");
}

TEST_CASE("files that are not checkpoints are rejected in one line", "[checkpoint]") {
  lab::test::ScratchDir dir("ckpt-notckpt");
  const fs::path text = dir.path / "notes.pt";
  lab::test::write_binary(text, "hello, this is not a model\n");
  CHECK_THROWS_WITH(lab::load_checkpoint(text), Catch::Contains("notes.pt: not a checkpoint"));
  const fs::path legacy = dir.path / "legacy.pt";
  lab::test::write_binary(legacy, std::string("\x80\x02\x8a\x0a", 4) + "0123456789");
  CHECK_THROWS_WITH(lab::load_checkpoint(legacy), Catch::Contains("legacy"));
  CHECK_THROWS_WITH(lab::load_checkpoint(dir.path / "absent.pt"),
                    Catch::Contains("absent.pt: cannot read checkpoint (no such file)"));
  const fs::path empty = dir.path / "empty.pt";
  lab::test::write_binary(empty, "");
  CHECK_THROWS_AS(lab::load_checkpoint(empty), UsageError);
  const fs::path truncated = dir.path / "truncated.pt";
  if (!lab::test::yolo26n_checkpoint().empty()) {
    lab::test::write_binary(truncated,
                            lab::test::read_binary(lab::test::yolo26n_checkpoint()).substr(0, 100000));
    CHECK_THROWS_WITH(lab::load_checkpoint(truncated),
                      Catch::Contains("truncated.pt: not a valid zip archive"));
  }
}
