// Inputs that are not regular files (issue 16 item 5): a FIFO, a device or a folder given where a file is
// read (images, checkpoints, safetensors, scenario TOML, label files, `lab convert`) is refused at once with
// one line naming it, instead of blocking forever on the FIFO. A watchdog opens the FIFO for writing after a
// while, so a reader that does block is released and the test fails instead of hanging.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>

#include "harness/scenario.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/loss/labels.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"
#ifdef LAB_VIEWER_BINARY
#include "viewer/script_parse.hpp"
#endif

namespace fs = std::filesystem;

namespace {

constexpr auto kPatience = std::chrono::seconds(10);

// Runs `read` on another thread; if it has not returned after kPatience, a writer opens and closes `fifo`
// (so a blocked open returns) and the test fails. Returns the UsageError message ("" when none).
std::string error_without_hanging(const fs::path& fifo, const std::function<void()>& read) {
  auto done = std::async(std::launch::async, [&]() -> std::string {
    try {
      read();
    } catch (const lab::UsageError& e) {
      return e.what();
    }
    return "";
  });
  if (done.wait_for(kPatience) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    done.wait();
    FAIL("reading " << fifo << " blocked for more than " << kPatience.count() << " s");
  }
  return done.get();
}

fs::path make_fifo(const fs::path& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

}  // namespace

TEST_CASE("every input reader refuses a FIFO at once, naming it", "[input][fifo]") {
  lab::test::ScratchDir dir("fifo-inputs");
  const std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> readers = {
      {"image", [](const fs::path& p) { lab::decode_image(p); }},
      {"checkpoint", [](const fs::path& p) { lab::load_checkpoint(p); }},
      {"safetensors file", [](const fs::path& p) { lab::SafetensorsFile::load(p); }},
      {"scenario file", [](const fs::path& p) { lab::load_scenario(p); }},
      {"labels file", [](const fs::path& p) { lab::loss::read_yolo_labels(p); }},
      {"JSON file", [](const fs::path& p) { lab::loss::read_labels_json(p); }},
#ifdef LAB_VIEWER_BINARY
      {"viewer script", [](const fs::path& p) { lab::viewer::parse_script(p); }},
#endif
  };
  int n = 0;
  for (const auto& [what, read] : readers) {
    const fs::path fifo = make_fifo(dir.path / ("input" + std::to_string(n++)));
    const std::string error = error_without_hanging(fifo, [&, &read = read] { read(fifo); });
    CHECK(error == fifo.string() + ": cannot read " + what + " (a FIFO, not a regular file)");
  }
}

TEST_CASE("a device or a folder as an input file is refused with its kind", "[input]") {
  lab::test::ScratchDir dir("device-inputs");
  CHECK_THROWS_WITH(lab::decode_image("/dev/null"),
                    "/dev/null: cannot read image (a device, not a regular file)");
  CHECK_THROWS_WITH(lab::load_checkpoint(dir.path),
                    dir.path.string() + ": cannot read checkpoint (a folder, not a regular file)");
  fs::create_symlink("loop", dir.path / "loop");
  CHECK_THROWS_WITH(lab::read_input_file(dir.path / "loop", "labels file"),
                    (dir.path / "loop").string() + ": cannot read labels file (a symlink loop)");
  lab::test::write_file(dir.path / "x.txt", "12345");
  CHECK(lab::read_input_file(dir.path / "x.txt", "labels file") == "12345");
  CHECK(lab::read_input_prefix(dir.path / "x.txt", 3, "checkpoint") == "123");
}

TEST_CASE("lab convert and lab scenario run given a FIFO exit 2 at once", "[input][fifo][cli]") {
  lab::test::ScratchDir dir("fifo-cli");
  const fs::path fifo = make_fifo(dir.path / "model.pt");
  const fs::path toml = make_fifo(dir.path / "cases.toml");
  auto convert = std::async(std::launch::async, [&] {
    return lab::test::run_lab("convert " + lab::test::quoted(fifo.string()) + " " +
                              lab::test::quoted((dir.path / "out.safetensors").string()));
  });
  error_without_hanging(fifo, [&] { convert.wait(); });
  const lab::test::LabResult c = convert.get();
  CHECK(c.exit_code == 2);
  CHECK(c.err == "lab: " + fifo.string() + ": cannot read checkpoint (a FIFO, not a regular file)\n");
  CHECK_FALSE(fs::exists(dir.path / "out.safetensors"));

  auto scenario = std::async(std::launch::async, [&] {
    return lab::test::run_lab("scenario run " + lab::test::quoted(toml.string()) + " --backend cpu");
  });
  error_without_hanging(toml, [&] { scenario.wait(); });
  const lab::test::LabResult s = scenario.get();
  CHECK(s.exit_code == 2);
  CHECK(s.err == "lab: " + toml.string() + ": cannot read scenario file (a FIFO, not a regular file)\n");
}
