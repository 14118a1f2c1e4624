// Terminal and log injection (issue 16 item 8): untrusted text (file names, pickle class names, label lines,
// safetensors keys, scenario case names) reaches messages escaped: no escape sequence reaches the terminal
// and a newline in a name cannot forge another "lab:" line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "tests/checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/loss/labels.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

// No control byte (C0, DEL) and no C1 control (UTF-8 C2 80..C2 9F) left in `text`.
bool terminal_safe(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F) return false;
  }
  return true;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lab::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("printable escapes control characters and broken UTF-8 and keeps the rest", "[printable]") {
  using lab::printable;
  CHECK(printable("plain text, / and \\ too") == "plain text, / and \\ too");
  CHECK(printable("a\x1b[31mred\nlab: forged\r\t") == "a\\x1b[31mred\\nlab: forged\\r\\t");
  CHECK(printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x8c") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x8c");
  CHECK(printable("csi\xc2\x9b"
                  "2J") == "csi\\xc2\\x9b2J");                              // U+009B, the 8-bit CSI
  CHECK(printable("bad\xff\xc3(\xe2\x82") == "bad\\xff\\xc3(\\xe2\\x82");   // invalid and truncated sequences
  CHECK(printable("\xc0\xaf\xed\xa0\x80") == "\\xc0\\xaf\\xed\\xa0\\x80");  // overlong form, surrogate
  CHECK(printable(std::string(100, 'x'), 10) == "xxxxxxxxxx...(100 bytes)");
  const std::string hostile = "\x1b]0;title\x07\n\xc2\x85\xff";
  CHECK(printable(printable(hostile)) == printable(hostile));
  CHECK(terminal_safe(printable(hostile)));
}

TEST_CASE("a pickle class name with escape sequences and newlines is printed escaped",
          "[printable][checkpoint]") {
  lab::test::ScratchDir dir("printable-pickle");
  const fs::path pt = dir.path / "t.pt";
  lab::test::PickleBytes p;
  // STACK_GLOBAL: the names are strings on the stack, so they may hold newlines.
  p.proto(4).text("os\x1b[2J").text("system\nlab: all checks passed").op('\x93').op('.');
  lab::test::write_zip(pt, {{"t/data.pkl", p.str()}, {"t/byteorder", "little"}});
  const std::string error = error_of([&] { lab::load_checkpoint(pt); });
  CHECK(error ==
        pt.string() + ": t/data.pkl: unsupported class 'os\\x1b[2J.system\\nlab: all checks passed'");
  CHECK(terminal_safe(error));
}

TEST_CASE("label lines and safetensors keys are quoted escaped and short", "[printable]") {
  lab::test::ScratchDir dir("printable-inputs");
  const fs::path labels = dir.path / "l.txt";
  lab::test::write_file(labels, "0 0.5 0.5 0.1 0.1\n\x1b[2Jperson\x1b]0;owned\x07 0.5 0.5 0.1 0.1\n");
  const std::string label_error = error_of([&] { lab::loss::read_yolo_labels(labels); });
  CHECK(label_error ==
        labels.string() + ":2: class '\\x1b[2Jperson\\x1b]0;owned\\x07' is not an integer >= 0");
  lab::test::write_file(labels, "0 0.5 0.5\x1b[2J" + std::string(5000, '9') + "\n");
  const std::string long_error = error_of([&] { lab::loss::read_yolo_labels(labels); });
  CHECK(terminal_safe(long_error));
  CHECK(long_error.size() < 300);

  const fs::path st = dir.path / "k.safetensors";
  lab::write_safetensors(st, {lab::f32_tensor("w\x1b[2J\nlab: ok", {2}, {1, 2})});
  const std::string key_error = error_of([&] { lab::SafetensorsFile::load(st).info("missing"); });
  CHECK(key_error == st.string() + ": no tensor named 'missing' (the file has: w\\x1b[2J\\nlab: ok)");
}

TEST_CASE("a file name with a newline and escape sequences cannot forge lab: lines", "[printable][cli]") {
  lab::test::ScratchDir dir("printable-cli");
  const fs::path evil = dir.path / "evil\nlab: all 2 images passed\x1b[2J.pt";
  lab::test::write_file(evil, "not a checkpoint");
  const lab::test::LabResult r = lab::test::run_lab("convert " + lab::test::quoted(evil.string()) + " " +
                                                    lab::test::quoted((dir.path / "o.safetensors").string()));
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(terminal_safe(r.err.substr(0, r.err.size() - 1)));
  CHECK(lab::test::contains(r.err, "evil\\nlab: all 2 images passed\\x1b[2J.pt: not a checkpoint"));
}

TEST_CASE("lab scenario list prints a hostile file name and kernel name escaped", "[printable][cli]") {
  lab::test::ScratchDir dir("printable-scenarios");
  lab::test::write_file(dir.path / "evil\x1b[2J.toml",
                        "kernel = \"\\u001b]0;owned\\u0007\"\n[[case]]\nname = \"a\"\nparams = {}\n");
  const lab::test::LabResult r =
      lab::test::run_lab("scenario list --scenarios-dir " + lab::test::quoted(dir.path.string()));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(lab::test::contains(r.out, "evil\\x1b[2J.toml"));
  CHECK(lab::test::contains(r.out, "\\x1b]0;owned\\x07"));
  std::string lines = r.out;
  lines.erase(std::remove(lines.begin(), lines.end(), '\n'), lines.end());
  CHECK(terminal_safe(lines));
}
