// `lab source` as Compiler Explorer / Nsight Compute show a kernel: one entry point (--entry, by its
// demangled name), source lines interleaved with the PTX or SASS generated from them (--interleave), and a
// static occupancy for the target architecture without a GPU. Expected source lines are read from the kernel
// file itself; the PTX line information is checked against a plain scan of the .loc directives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/test_helpers.hpp"

namespace {

using lab::test::contains;
using lab::test::LabResult;
using lab::test::run_lab;

const std::string kAttention = "flash_attn2_fwd";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("lab source --entry prints one entry point, found by its demangled name", "[cli][inspect]") {
  const LabResult module = run_lab("source " + kAttention + " --ptx --arch sm_90");
  REQUIRE(module.exit_code == 0);
  REQUIRE(count_of(module.out, ".entry ") == 5);
  // Each entry is headed by its demangled name.
  CHECK(contains(module.out, "// void flash_attn2_fwd_tiled<64, 16>(lab::FlashAttn2FwdParams)\n"
                             ".weak .entry _Z21flash_attn2_fwd_tiled"));

  for (const std::string& name : {std::string("flash_attn2_fwd_tiled"), std::string("'flash_attn2_fwd_tiled<64, 16>'"),
                                   std::string("_Z21flash_attn2_fwd_tiledILi64ELi16EEvN3lab19FlashAttn2FwdParamsE")}) {
    const LabResult one = run_lab("source " + kAttention + " --ptx --arch sm_90 --entry " + name);
    REQUIRE(one.exit_code == 0);
    CHECK(count_of(one.out, ".entry ") == 1);
    CHECK(contains(one.out, ".entry _Z21flash_attn2_fwd_tiled"));
    CHECK(!contains(one.out, "flash_attn2_bwd"));
    CHECK(lines_of(one.out).size() * 3 < lines_of(module.out).size());
  }
  const LabResult sass = run_lab("source " + kAttention + " --sass --arch sm_90 --entry flash_attn2_fwd_tiled");
  REQUIRE(sass.exit_code == 0);
  CHECK(count_of(sass.out, "//--------------------- .text.") == 1);
  CHECK(contains(sass.out, ".text._Z21flash_attn2_fwd_tiled"));

  const LabResult json = run_lab("source " + kAttention + " --ptx --arch sm_90 --json --entry flash_attn2_fwd_tiled");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["entries"].size() == 1);
  CHECK(parsed["entries"][0]["demangled"].get<std::string>().rfind("void flash_attn2_fwd_tiled<64, 16>(", 0) == 0);
}

TEST_CASE("lab source --entry and --interleave reject bad use with one line and exit 2", "[cli][inspect]") {
  const LabResult unknown = run_lab("source " + kAttention + " --ptx --arch sm_90 --entry nope");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err ==
        "lab: --entry 'nope' names no entry point (entries: attn_probs_tiled<64>, flash_attn2_bwd_dkdv_tiled<64, "
        "16>, flash_attn2_bwd_dq_tiled<64, 16>, flash_attn2_bwd_preprocess_tiled<64>, flash_attn2_fwd_tiled<64, "
        "16>)\n");
  const LabResult no_output = run_lab("source " + kAttention + " --entry flash_attn2_fwd_tiled");
  CHECK(no_output.exit_code == 2);
  CHECK(no_output.err == "lab: --entry needs --ptx or --sass\n");
  CHECK(run_lab("source " + kAttention + " --resources --interleave").exit_code == 2);
}

TEST_CASE("lab source --interleave puts each source line before the PTX its .loc lines give it", "[cli][inspect]") {
  const LabResult plain = run_lab("source detect_decode --ptx --arch sm_90");
  const LabResult mixed = run_lab("source detect_decode --ptx --arch sm_90 --interleave");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(mixed.exit_code == 0);
  const std::vector<std::string> kernel_lines =
      lines_of(lab::test::read_text(std::filesystem::path(LAB_SOURCE_DIR) / "kernels/detect/detect_decode.cu"));

  // An independent reading of the plain PTX: after each `.loc 1 N`, the instructions until the next .loc or
  // the end of the body belong to line N of file 1 (the kernel file).
  std::vector<std::pair<int, std::string>> expected;  // (source line, instruction)
  const std::regex loc(R"(^\s*\.loc\s+1\s+(\d+)\s)");
  int current = 0;
  for (const std::string& line : lines_of(plain.out)) {
    std::smatch m;
    if (std::regex_search(line, m, loc)) {
      current = std::stoi(m[1]);
    } else if (line == "}") {
      current = 0;
    } else if (current > 0 && line.size() > 1 && line[0] == '\t' && line.find(';') != std::string::npos) {
      expected.emplace_back(current, line);
    }
  }
  REQUIRE(expected.size() > 20);

  // In the interleaved text, every such instruction sits under the header of its source line, which quotes
  // that line of the file; no .loc directive is left.
  int header = 0;
  size_t matched = 0;
  const std::regex header_re(R"(^// detect/detect_decode\.cu:(\d+): (.*)$)");
  for (const std::string& line : lines_of(mixed.out)) {
    std::smatch m;
    CHECK(line.find(".loc\t") == std::string::npos);
    if (std::regex_match(line, m, header_re)) {
      header = std::stoi(m[1]);
      REQUIRE(header >= 1);
      REQUIRE(size_t(header) <= kernel_lines.size());
      CHECK(m[2] == kernel_lines[size_t(header) - 1]);
    } else if (matched < expected.size() && line == expected[matched].second) {
      CHECK(header == expected[matched].first);
      ++matched;
    }
  }
  CHECK(matched == expected.size());
  // The stores of the four outputs come from lines 26 to 29 (`out[...] = ...`).
  for (int line = 26; line <= 29; ++line) CHECK(contains(kernel_lines[size_t(line) - 1], "out["));
  CHECK(std::count_if(expected.begin(), expected.end(), [](const auto& e) {
          return e.first >= 26 && e.first <= 29 && contains(e.second, "st.global.f32");
        }) == 4);
}

TEST_CASE("lab source --sass --interleave maps SASS to source lines through nvdisasm's line info", "[cli][inspect]") {
  const LabResult mixed = run_lab("source detect_decode --sass --arch sm_90 --interleave");
  REQUIRE(mixed.exit_code == 0);
  CHECK(!contains(mixed.out, "//## File"));
  // The SASS stores (STG) sit under the `out[...] = ...` lines that make them.
  std::string header;
  int stores = 0;
  for (const std::string& line : lines_of(mixed.out)) {
    if (line.rfind("// detect/detect_decode.cu:", 0) == 0) header = line;
    if (contains(line, " STG.E")) {
      CHECK(contains(header, "out[base"));
      ++stores;
    }
  }
  CHECK(stores == 4);
}

TEST_CASE("lab source --resources gives a static occupancy for the target architecture", "[cli][inspect]") {
  const LabResult table = run_lab("source detect_decode --resources --arch sm_90");
  REQUIRE(table.exit_code == 0);
  CHECK(contains(table.out, "warps/SM"));
  if (!lab::cuda_device_present())  // on a GPU of this arch the runtime's figure is shown instead
    CHECK(contains(table.out, "occupancy: static, from the sm_90 limits at 256 threads per block (no GPU)"));
  CHECK(!contains(table.out, "needs a GPU"));
  const LabResult json = run_lab("source detect_decode --resources --arch sm_90 --json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json kernel = nlohmann::json::parse(json.out)[0]["kernels"][0];
  // detect_decode uses fewer than 32 registers and no shared memory: 8 blocks of 256 threads fill the 64
  // warps of an sm_90 SM.
  REQUIRE(kernel["registers"].get<int>() <= 32);
  CHECK(kernel["static_occupancy"]["blocks_per_sm"] == 8);
  CHECK(kernel["static_occupancy"]["active_warps"] == 64);
  CHECK(kernel["static_occupancy"]["limited_by"] == "warps");
  const LabResult other = run_lab("source detect_decode --resources --arch sm_86 --json");
  REQUIRE(other.exit_code == 0);
  CHECK(nlohmann::json::parse(other.out)[0]["kernels"][0]["static_occupancy"]["blocks_per_sm"] == 6);
}

TEST_CASE("lab source --resources --block-threads computes the occupancy at that block size", "[cli][inspect]") {
  const LabResult json = run_lab("source detect_decode --resources --arch sm_90 --block-threads 96 --json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(json.out)[0];
  CHECK(report["occupancy_block_threads"] == 96);
  const nlohmann::json kernel = report["kernels"][0];
  // At most 32 registers: 3 warps a block, so 64 warps hold 21 blocks (63 warps), under the 32-block limit.
  REQUIRE(kernel["registers"].get<int>() <= 32);
  CHECK(kernel["static_occupancy"]["blocks_per_sm"] == 21);
  CHECK(kernel["static_occupancy"]["active_warps"] == 63);
  CHECK(kernel["static_occupancy"]["limited_by"] == "warps");
  const LabResult alone = run_lab("source detect_decode --block-threads 96");
  CHECK(alone.exit_code == 2);
  CHECK(contains(alone.err, "--block-threads requires --resources"));
  const LabResult zero = run_lab("source detect_decode --resources --block-threads 0");
  CHECK(zero.exit_code == 2);
  CHECK(contains(zero.err, "--block-threads: must be between 1 and 1024 (got 0)"));
}
