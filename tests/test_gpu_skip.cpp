// lab_tests under ctest, end to end. The [gpu] skip mechanism: with no CUDA device visible, ctest runs a
// [gpu] test and reports it as skipped, not passed, and still exits 0, so `make test` on a machine without a
// GPU stays green with honest counts. The registration: catch_discover_tests makes one ctest entry per test
// case name the binary lists, but passes the names through a CMake list, so a name with ';' in it became
// several entries, each selecting no test case and reported as passed without running anything
// (tests/CMakeLists.txt now adds `--warn NoTests`, so such an entry fails too). ctest runs in a scratch
// directory over a copy of the build's test list, so its logs never touch the build tree's Testing/ folder.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::test::contains;
using lab::test::LabResult;
using lab::test::run_command;

namespace {

// lab_tests carried to another machine (scripts/pack-device.sh) has neither the build tree nor ctest.
bool no_build_tree() {
  if (fs::exists(LAB_CTEST_FILE) && fs::exists(LAB_CTEST_COMMAND)) return false;
  WARN("skipped: no build tree here (" LAB_CTEST_FILE ") or no " LAB_CTEST_COMMAND);
  return true;
}

// This binary's test case names as `spec` selects them, one a line.
std::string listed_names(const std::string& spec) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const LabResult list =
      run_command(lab::test::quoted(self.string()) + " " + spec + " --list-test-names-only");
  REQUIRE(list.exit_code >= 0);
  return list.out;
}

}  // namespace

TEST_CASE("ctest reports a [gpu] test as skipped when no CUDA device is visible, and exits 0", "[ctest]") {
  if (no_build_tree()) return;
  // The first [gpu] test of this binary, as ctest names it (catch_discover_tests uses the test name).
  const std::string list = listed_names("'[gpu]'");
  std::istringstream names(list);
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

TEST_CASE("every test case of lab_tests is one ctest entry under its own name", "[ctest]") {
  if (no_build_tree()) return;
  // The test cases as tests/CMakeLists.txt's two catch_discover_tests calls list them ("~[gpu]" selects the
  // hidden ones too).
  std::map<std::string, int> missing;  // test case name -> listed minus registered
  for (const char* spec : {"'[gpu]'", "'~[gpu]'"}) {
    std::istringstream names(listed_names(spec));
    for (std::string name; std::getline(names, name);)
      if (!name.empty()) ++missing[name];
  }
  REQUIRE(missing.size() > 100);

  // ctest over a copy of the build's test list in a scratch folder: nothing written to the build tree.
  lab::test::ScratchDir dir("ctest-entries");
  fs::copy_file(LAB_CTEST_FILE, dir.path / "CTestTestfile.cmake");
  const LabResult shown = run_command(lab::test::quoted(LAB_CTEST_COMMAND) + " --test-dir " +
                                      lab::test::quoted(dir.path.string()) + " --show-only=json-v1");
  REQUIRE(shown.exit_code == 0);
  const nlohmann::json entries = nlohmann::json::parse(shown.out);
  for (const nlohmann::json& entry : entries.at("tests")) --missing[entry.at("name").get<std::string>()];

  std::string unmatched;  // "+name": a test case without its entry; "-name": an entry that is no test case
  for (const auto& [name, count] : missing)
    if (count != 0) unmatched += (count > 0 ? "\n+" : "\n-") + name;
  INFO("test cases without exactly one ctest entry of their name (+), entries naming no test case (-):"
       << unmatched);
  CHECK(unmatched.empty());
}
