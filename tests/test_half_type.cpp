// The 16-bit element types on the host: their names (parse errors list the valid ones) and the conversions
// the fp16/bf16 runners round their inputs and read their outputs with (nearest even, NaN kept NaN).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/errors.hpp"

using namespace lab;

TEST_CASE("16-bit element types parse by name", "[attention]") {
  CHECK(parse_half_type("f16") == HalfType::f16);
  CHECK(parse_half_type("bf16") == HalfType::bf16);
  for (const char* bad : {"fp16", "F16", "half", "bfloat16", ""})
    CHECK_THROWS_MATCHES(
        parse_half_type(bad), UsageError,
        Catch::Message("unknown 16-bit element type '" + std::string(bad) + "' (valid: f16, bf16)"));
}

TEST_CASE("floats round to fp16 and bf16 to nearest even and convert back exactly", "[attention]") {
  // 1 + half an ulp is a tie that stays at 1 (even); 1 + 3/2 ulp is a tie that goes up to 1 + 2 ulp.
  CHECK(to_half_bits({1.f, -2.f, 1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 0x1p-24f, 65520.f}, HalfType::f16) ==
        std::vector<uint16_t>{0x3c00, 0xc000, 0x3c00, 0x3c02, 0x0001, 0x7c00});
  CHECK(to_half_bits({1.f, -2.f, 1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 0x1p-133f}, HalfType::bf16) ==
        std::vector<uint16_t>{0x3f80, 0xc000, 0x3f80, 0x3f82, 0x0001});
  CHECK(half_bits_to_float({0x3c01, 0x0001, 0xfc00}, HalfType::f16) ==
        std::vector<float>{1 + 0x1p-10f, 0x1p-24f, -INFINITY});
  CHECK(half_bits_to_float({0x3f81, 0x0001}, HalfType::bf16) == std::vector<float>{1 + 0x1p-7f, 0x1p-133f});
  for (HalfType t : {HalfType::f16, HalfType::bf16}) CHECK(std::isnan(half_bits_to_float({0xffff}, t)[0]));
}
