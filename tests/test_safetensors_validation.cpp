// Safetensors validation as the format specifies (issue 16 item 10): the header is one JSON object padded
// with spaces and nothing else; the tensors, in the order of their offsets, tile the data section exactly
// (no gap, no overlap, nothing left over); dtype, shape and byte count agree without overflow; and messages
// stay short however long the offending value is.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include "tests/checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

// An 8-byte length (`header.size()` + `length_delta`), `header`, then `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data, int length_delta = 0) {
  const uint64_t n = header.size() + length_delta;
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

struct Fixture {
  lab::test::ScratchDir dir{"safetensors-validation"};
  fs::path file = dir.path / "t.safetensors";

  // The UsageError of SafetensorsFile::load on `bytes`; "" when the file loads.
  std::string error(const std::string& bytes) {
    lab::test::write_binary(file, bytes);
    try {
      lab::SafetensorsFile::load(file);
    } catch (const lab::UsageError& e) {
      return e.what();
    }
    return "";
  }
};

const std::string kEight(8, '\x11');  // two F32 values

std::string two_tensors(const std::string& a_offsets, const std::string& b_offsets) {
  return R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": )" + a_offsets +
         R"(}, "b": {"dtype": "F32", "shape": [1], "data_offsets": )" + b_offsets + "}}";
}

}  // namespace

TEST_CASE("safetensors offsets must tile the data section exactly", "[safetensors]") {
  Fixture f;
  const std::string p = f.file.string() + ": ";
  CHECK(f.error(safetensors_bytes(two_tensors("[0, 4]", "[4, 8]"), kEight)).empty());
  CHECK(f.error(safetensors_bytes(two_tensors("[4, 8]", "[0, 4]"), kEight)).empty());  // any key order
  CHECK(f.error(safetensors_bytes(two_tensors("[0, 4]", "[0, 4]"), kEight)) ==
        p + "tensor 'b': data_offsets [0, 4] overlap the tensor before it (which ends at 4)");
  // The checkpoint loader reads safetensors through the same validation.
  CHECK_THROWS_WITH(lab::load_checkpoint(f.file),
                    p + "tensor 'b': data_offsets [0, 4] overlap the tensor before it (which ends at 4)");
  CHECK(f.error(safetensors_bytes(two_tensors("[0, 4]", "[2, 6]"), kEight)) ==
        p + "tensor 'b': data_offsets [2, 6] overlap the tensor before it (which ends at 4)");
  CHECK(f.error(safetensors_bytes(two_tensors("[4, 8]", "[4, 8]"), kEight)) ==
        p + "tensor 'a': data_offsets [4, 8] leave a gap after byte 0 of the data section");
  CHECK(f.error(safetensors_bytes(two_tensors("[0, 4]", "[4, 8]"), kEight + "left")) ==
        p + "the data section has 12 bytes but the tensors cover 8 (header length or data_offsets wrong)");
  // A zero-size tensor may sit anywhere inside the tiling.
  CHECK(f.error(safetensors_bytes(R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}, )" +
                                      two_tensors("[0, 4]", "[4, 8]").substr(1),
                                  kEight))
            .empty());
}

TEST_CASE("the safetensors header is JSON only, padded with spaces", "[safetensors]") {
  Fixture f;
  const std::string p = f.file.string() + ": ";
  const std::string header = two_tensors("[0, 4]", "[4, 8]");
  CHECK(f.error(safetensors_bytes(header + "      ", kEight)).empty());
  CHECK(f.error(safetensors_bytes(header + std::string("\0garbage", 8), kEight)) ==
        p + "the header is not one JSON object padded with spaces");
  CHECK(f.error(safetensors_bytes(header + "\n", kEight)) ==
        p + "the header is not one JSON object padded with spaces");
  CHECK(f.error(safetensors_bytes(" " + header, kEight)) ==
        p + "the header is not one JSON object padded with spaces");
  CHECK(lab::test::contains(f.error(safetensors_bytes(header + "{}", kEight)),
                            p + "the header is not valid JSON ("));
  // A number too large for a double (found by the long fuzz run): a JSON error, not another exception.
  CHECK(lab::test::contains(
      f.error(
          safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})", "1234")),
      p + "the header is not valid JSON ([json.exception.out_of_range.406] number overflow"));
  lab::write_safetensors(
      f.file, {lab::f32_tensor("x", {1}, {1})},
      {{"format", "yolo26-kernel-lab"}, {"names", "[1e400]"}, {"nc", "1"}, {"scale", ""}, {"yaml", "{}"}});
  CHECK_THROWS_WITH(lab::load_checkpoint(f.file), p + "__metadata__ names is not JSON");
  // A header length one past the real header swallows the first data byte into the header.
  CHECK(lab::test::contains(f.error(safetensors_bytes(header, kEight + "x", 1)),
                            p + "the header is not valid JSON ("));
  // ... and when that byte is a space (valid padding), the data section comes up one byte short.
  CHECK(f.error(safetensors_bytes(header, " " + kEight.substr(1), 1)) ==
        p + "tensor 'b': data_offsets [4, 8] out of range (the data section has 7 bytes)");
}

TEST_CASE("safetensors shapes: byte counts checked without overflow, long values cut short",
          "[safetensors]") {
  Fixture f;
  const std::string p = f.file.string() + ": ";
  // 2^32 x 2^32 elements of 4 bytes wraps a 64-bit product to 0.
  CHECK(f.error(safetensors_bytes(
            R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", "")) ==
        p + "tensor 'a': shape [4294967296,4294967296] has more bytes than 2^64");
  std::string shape = "[";
  for (int i = 0; i < 1000; ++i) shape += (i ? ", " : "") + std::string("1");
  shape += "]";
  const std::string long_shape = f.error(safetensors_bytes(
      R"({"a": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 8]}})", kEight));
  CHECK(lab::test::contains(long_shape, "tensor 'a': data_offsets span 8 bytes but F32 [1, 1, 1"));
  CHECK(long_shape.size() < 250);
  const std::string long_key = f.error(safetensors_bytes(
      R"({")" + std::string(5000, 'k') + R"(": {"dtype": "Q4", "shape": [], "data_offsets": [0, 0]}})", ""));
  CHECK(lab::test::contains(long_key, "...(5000 bytes)': unknown dtype 'Q4'"));
  CHECK(long_key.size() < 250);
}
