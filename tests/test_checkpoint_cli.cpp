// `lab convert` as a user runs it: .pt -> .safetensors (one summary line, exit 0), .safetensors ->
// .safetensors, and bad input (exit 2, one line naming the file, no output or temporary file left behind).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <sys/wait.h>

#include "tests/checkpoint_test_support.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using Run = lab::test::LabResult;
using lab::test::quoted;

Run run_convert(const std::string& in, const std::string& out) {
  return lab::test::run_lab("convert " + quoted(in) + " " + quoted(out));
}

size_t lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("lab convert writes a safetensors checkpoint and reports it in one line", "[checkpoint][cli]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  lab::test::ScratchDir dir("convert-out");
  const fs::path out = dir.path / "yolo26n.safetensors";
  const Run r = run_convert(pt.string(), out.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(lines(r.out) == 1);
  CHECK(r.out == "wrote " + out.string() + ": 594 tensors, 2591848 parameters, dtype F16, nc 80, scale n\n");
  CHECK(lab::load_checkpoint(out).class_names.at(5) == "bus");

  // .safetensors in, .safetensors out (replacing an existing file).
  const fs::path again = dir.path / "again.safetensors";
  lab::test::write_binary(again, "old");
  const Run r2 = run_convert(out.string(), again.string());
  REQUIRE(r2.exit_code == 0);
  CHECK(lab::test::read_binary(again) == lab::test::read_binary(out));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);
}

TEST_CASE("lab convert rejects bad input with exit 2 and leaves no file behind", "[checkpoint][cli]") {
  lab::test::ScratchDir dir("convert-bad");
  const fs::path text = dir.path / "notes.pt";
  lab::test::write_binary(text, "not a model at all\n");
  const fs::path out = dir.path / "out.safetensors";
  const Run r = run_convert(text.string(), out.string());
  CHECK(r.exit_code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find(text.string()) != std::string::npos);
  CHECK_FALSE(fs::exists(out));

  const Run missing = run_convert((dir.path / "absent.pt").string(), out.string());
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("absent.pt: cannot read checkpoint (no such file)") != std::string::npos);

  if (!lab::test::yolo26n_checkpoint().empty()) {
    // Truncated checkpoint.
    const fs::path cut = dir.path / "cut.pt";
    lab::test::write_binary(cut,
                            lab::test::read_binary(lab::test::yolo26n_checkpoint()).substr(0, 2'000'000));
    const Run r3 = run_convert(cut.string(), out.string());
    CHECK(r3.exit_code == 2);
    CHECK(lines(r3.err) == 1);
    CHECK_FALSE(fs::exists(out));
    // Output into a folder that does not exist: exit 2, nothing written anywhere.
    const Run r4 = run_convert(lab::test::yolo26n_checkpoint().string(),
                               (dir.path / "no-such-dir" / "x.safetensors").string());
    CHECK(r4.exit_code == 2);
    CHECK(r4.err.find("x.safetensors") != std::string::npos);
  }
  // Only the inputs remain: no output, no temporary file.
  for (const auto& entry : fs::directory_iterator(dir.path)) CHECK(entry.path().extension() == ".pt");
}
