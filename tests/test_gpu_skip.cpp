// The [gpu] skip mechanism end to end: with no CUDA device visible, ctest runs a [gpu] test and reports it as
// skipped, not passed, and still exits 0, so `make test` on a machine without a GPU stays green with honest
// counts. ctest runs in a scratch directory over a copy of the build's test list, so its logs never touch
// the build tree's Testing/ folder.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::test::contains;
using lab::test::LabResult;
using lab::test::run_command;

TEST_CASE("ctest reports a [gpu] test as skipped when no CUDA device is visible, and exits 0", "[ctest]") {
  // lab_tests carried to another machine (scripts/pack-device.sh) has neither the build tree nor ctest.
  if (!fs::exists(LAB_CTEST_FILE) || !fs::exists(LAB_CTEST_COMMAND)) {
    WARN("skipped: no build tree here (" LAB_CTEST_FILE ") or no " LAB_CTEST_COMMAND);
    return;
  }
  // The first [gpu] test of this binary, as ctest names it (catch_discover_tests uses the test name).
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const LabResult list = run_command(lab::test::quoted(self.string()) + " '[gpu]' --list-test-names-only");
  REQUIRE(list.exit_code >= 0);
  std::istringstream names(list.out);
  std::string name;
  REQUIRE(std::getline(names, name));
  REQUIRE(!name.empty());

  lab::test::ScratchDir dir("ctest-skip");
  fs::copy_file(LAB_CTEST_FILE, dir.path / "CTestTestfile.cmake");
  std::string regex = "^";
  for (char c : name) {
    if (std::string(".^$|()[]{}*+?\\").find(c) != std::string::npos) regex += '\\';
    regex += c;
  }
  regex += "$";
  // CUDA_VISIBLE_DEVICES=-1 hides every device, so the check means the same on the GPU machine.
  const LabResult r = run_command("CUDA_VISIBLE_DEVICES=-1 " + lab::test::quoted(LAB_CTEST_COMMAND) +
                                  " --test-dir " + lab::test::quoted(dir.path.string()) + " -L gpu -R " +
                                  lab::test::quoted(regex));
  INFO("ctest for '" << name << "':\n" << r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "out of 1"));
  CHECK(contains(r.out, "Skipped"));
  CHECK(!contains(r.out, "Passed"));
}
