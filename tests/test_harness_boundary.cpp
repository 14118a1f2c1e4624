// The viewer and the `lab` command share the harness library; the viewer uses nothing of lab/ (the CLI:
// CLI11 commands, option parsing, printing), and the harness itself nothing of lab/ or CLI11.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <sstream>

#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

// "file:line: text" for every line of the C++ files under `dir` that includes a header matching `pattern`.
std::string includes_matching(const fs::path& dir, const std::regex& pattern) {
  std::ostringstream found;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    std::istringstream lines(lab::test::read_text(e.path()));
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n)
      if (std::regex_search(line, pattern)) found << e.path().string() << ":" << n << ": " << line << "\n";
  }
  return found.str();
}

const fs::path kSource = LAB_SOURCE_DIR;
const std::regex kLabInclude(R"(^\s*#\s*include\s*[<"]lab/)");
const std::regex kCli11Include(R"(^\s*#\s*include\s*[<"]CLI/)");

}  // namespace

TEST_CASE("the viewer includes nothing of lab/", "[harness]") {
  CHECK(includes_matching(kSource / "viewer", kLabInclude) == "");
  // The guard itself sees an include of lab/ where there is one.
  CHECK(includes_matching(kSource / "lab", kLabInclude) != "");
}

TEST_CASE("the harness includes nothing of lab/ and no CLI11", "[harness]") {
  CHECK(includes_matching(kSource / "harness", kLabInclude) == "");
  CHECK(includes_matching(kSource / "harness", kCli11Include) == "");
  CHECK(includes_matching(kSource / "lab", kCli11Include) != "");
}
