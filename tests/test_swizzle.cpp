// kernels/common/lab_swizzle.cuh, the swizzle patterns wgmma descriptors and TMA tensor maps share: the chunk
// permutation of each mode against tables written out by hand from the PTX ISA's swizzle-atom figures (row r
// of the 128B pattern holds logical chunk c at c ^ r; the 64B pattern changes every two 64-byte rows, the 32B
// pattern every four 32-byte rows), and the address form's properties: bytes inside a chunk stay, the
// pattern repeats every 8 rows, every row is a permutation, and no mode moves a byte out of its row; then the
// same table from a kernel (tests/emulator_kernels/swizzle.cu) on every available backend.
#include <catch2/catch.hpp>

#include <set>

#include "kernels/common/lab_swizzle.cuh"
#include "tests/test_emulator_support.hpp"

TEST_CASE("swizzle: each mode's chunk permutation matches the PTX ISA's swizzle atoms", "[swizzle]") {
  // physical chunk of logical chunk c, row by row over one pattern (8 rows)
  const unsigned sw128[8][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5},
                                {3, 2, 1, 0, 7, 6, 5, 4}, {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
                                {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
  const unsigned sw64[8][4] = {{0, 1, 2, 3}, {0, 1, 2, 3}, {1, 0, 3, 2}, {1, 0, 3, 2},
                               {2, 3, 0, 1}, {2, 3, 0, 1}, {3, 2, 1, 0}, {3, 2, 1, 0}};
  const unsigned sw32[8][2] = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {1, 0}, {1, 0}, {1, 0}, {1, 0}};
  CHECK(lab_swizzle_row_bytes(LAB_SWIZZLE_128B) == 128);
  CHECK(lab_swizzle_row_bytes(LAB_SWIZZLE_64B) == 64);
  CHECK(lab_swizzle_row_bytes(LAB_SWIZZLE_32B) == 32);
  CHECK(lab_swizzle_row_bytes(LAB_SWIZZLE_NONE) == 16);
  for (unsigned pattern = 0; pattern < 3; ++pattern)  // the pattern repeats every 8 rows
    for (unsigned r = 0; r < 8; ++r) {
      const unsigned row = pattern * 8 + r;
      INFO("row " << row);
      for (unsigned c = 0; c < 8; ++c) CHECK(lab_swizzle_chunk(LAB_SWIZZLE_128B, row, c) == sw128[r][c]);
      for (unsigned c = 0; c < 4; ++c) CHECK(lab_swizzle_chunk(LAB_SWIZZLE_64B, row, c) == sw64[r][c]);
      for (unsigned c = 0; c < 2; ++c) CHECK(lab_swizzle_chunk(LAB_SWIZZLE_32B, row, c) == sw32[r][c]);
      CHECK(lab_swizzle_chunk(LAB_SWIZZLE_NONE, row, 0) == 0);
    }
}

TEST_CASE("swizzle: addresses move whole chunks within their row and keep the pattern's bytes", "[swizzle]") {
  for (const int mode : {LAB_SWIZZLE_NONE, LAB_SWIZZLE_32B, LAB_SWIZZLE_64B, LAB_SWIZZLE_128B}) {
    const unsigned row_bytes = lab_swizzle_row_bytes(mode), pattern_bytes = 8 * row_bytes;
    INFO("mode " << mode);
    const unsigned base = 0x2c00;  // a multiple of every pattern size (1024)
    std::set<unsigned> seen;
    size_t moved_out_of_row = 0, split_chunk = 0;
    for (unsigned offset = 0; offset < 2 * pattern_bytes; ++offset) {
      const unsigned physical = lab_swizzle_address(mode, base + offset);
      seen.insert(physical);
      moved_out_of_row += (physical - base) / row_bytes != offset / row_bytes;
      split_chunk += physical % 16 != offset % 16;
      CHECK(lab_swizzle_address(mode, base + offset + pattern_bytes) == physical + pattern_bytes);
    }
    CHECK(seen.size() == 2 * pattern_bytes);  // a permutation
    CHECK(*seen.begin() == base);
    CHECK(*seen.rbegin() == base + 2 * pattern_bytes - 1);
    CHECK(moved_out_of_row == 0);
    CHECK(split_chunk == 0);
  }
  CHECK(lab_swizzle_address(LAB_SWIZZLE_NONE, 0x1234) == 0x1234);
  // 128B: byte 5 of chunk 2 in row 3 of a pattern at 0x400 lies in chunk 2 ^ 3 = 1.
  CHECK(lab_swizzle_address(LAB_SWIZZLE_128B, 0x400 + 3 * 128 + 2 * 16 + 5) == 0x400 + 3 * 128 + 1 * 16 + 5);
}

TEST_CASE("swizzle: kernels get the same permutation on every backend, the emulator's copy included",
          "[swizzle][emulator]") {
  std::vector<unsigned> expected(256, 0xffffffffu);
  for (unsigned mode = 0; mode < 4; ++mode)
    for (unsigned row = 0; row < 8; ++row)
      for (unsigned chunk = 0; chunk < lab_swizzle_row_bytes(int(mode)) / 16; ++chunk)
        expected[(mode * 8 + row) * 8 + chunk] = lab_swizzle_chunk(int(mode), row, chunk);
  for (const std::string& name : lab::available_backends()) {
    INFO("backend " << name);
    auto backend = lab::make_backend(name, lab::test::emulator_kernels_context());
    auto module = backend->compile({"swizzle.cu", {}, {"swizzle_table"}});
    lab::DeviceBuffer out = backend->upload_vector(std::vector<unsigned>(256, 0u));
    void* out_ptr = out.get();
    backend->launch(module->kernel("swizzle_table"), {{1, 1, 1}, {256, 1, 1}}, lab::kernel_args(out_ptr));
    backend->synchronize();
    CHECK(backend->download_vector<unsigned>(out, 256) == expected);
  }
}

TEST_CASE("swizzle: wgmma descriptors carry the address, byte offsets and mode in the PTX ISA's bit fields",
          "[swizzle]") {
  // start 0x1a40 -> 0x1a4, LBO 128 -> 8, SBO 1024 -> 64, 128B swizzle = 1 in bits 62-63
  CHECK(lab_wgmma_desc_bits(0x1a40, 128, 1024, LAB_SWIZZLE_128B) ==
        (0x1a4ull | 8ull << 16 | 64ull << 32 | 1ull << 62));
  CHECK(lab_wgmma_desc_bits(0x3fff0, 0x3fff0, 0x3fff0, LAB_SWIZZLE_32B) ==
        (0x3fffull | 0x3fffull << 16 | 0x3fffull << 32 | 3ull << 62));
  // addresses wrap at 256 KiB and drop their low 4 bits, like matrix-descriptor-encode
  CHECK(lab_wgmma_desc_bits(0x40000 + 0x25, 16, 16, LAB_SWIZZLE_NONE) == (0x2ull | 1ull << 16 | 1ull << 32));
  CHECK(lab_wgmma_desc_bits(0, 0, 0, LAB_SWIZZLE_64B) == 2ull << 62);
}
