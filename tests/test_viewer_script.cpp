// The viewer's script language against its documentation: every example of the action table in
// docs/viewer.md ("Scripted mode") parses, the table documents every verb the parser accepts, and the
// argument rules the table states (whole numbers where it says N, INDEX, X ...) are enforced; the screenshot
// scripts parse.
#include <catch2/catch.hpp>

#ifdef LAB_VIEWER_BINARY

#include <algorithm>
#include <set>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"
#include "viewer/script_parse.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

struct DocumentedAction {
  std::string verb, example;
};

// The rows "| `USAGE` | `EXAMPLE` | ... |" of the action table under "## Scripted mode".
std::vector<DocumentedAction> documented_actions() {
  const std::string doc = lab::test::read_text(fs::path(LAB_SOURCE_DIR) / "docs/viewer.md");
  const size_t section = doc.find("## Scripted mode");
  REQUIRE(section != std::string::npos);
  std::istringstream lines(doc.substr(section));
  std::vector<DocumentedAction> actions;
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t u0 = 3, u1 = line.find('`', u0);
    const size_t e0 = line.find('`', u1 + 1) + 1, e1 = line.find('`', e0);
    REQUIRE(e1 != std::string::npos);
    const std::string usage = line.substr(u0, u1 - u0);
    actions.push_back({usage.substr(0, usage.find(' ')), line.substr(e0, e1 - e0)});
  }
  return actions;
}

std::string parse_error(const fs::path& file, const std::string& script) {
  lab::test::write_file(file, script);
  try {
    lab::viewer::parse_script(file);
  } catch (const lab::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("viewer script: every documented action parses and every verb is documented", "[viewer_script]") {
  const std::vector<DocumentedAction> actions = documented_actions();
  REQUIRE(actions.size() >= 20);
  lab::test::ScratchDir dir("viewer-script");
  std::string script;
  std::set<std::string> documented;
  for (const DocumentedAction& a : actions) {
    INFO(a.example);
    CHECK(a.example.substr(0, a.example.find(' ')) == a.verb);  // the example uses its row's verb
    CHECK(parse_error(dir.path / "one.txt", a.example + "\n") == "");
    script += a.example + "\n";
    documented.insert(a.verb);
  }
  lab::test::write_file(dir.path / "all.txt", script);
  const auto parsed = lab::viewer::parse_script(dir.path / "all.txt");
  CHECK(parsed.size() == actions.size());
  const std::vector<std::string> verbs = lab::viewer::script_verbs();
  CHECK(std::set<std::string>(verbs.begin(), verbs.end()) == documented);
}

TEST_CASE("viewer script: the screenshot scripts of docs/viewer.md parse", "[viewer_script]") {
  CHECK_NOTHROW(lab::viewer::parse_script(fs::path(LAB_SOURCE_DIR) / "viewer/screenshots.script"));
  CHECK_NOTHROW(lab::viewer::parse_script(fs::path(LAB_SOURCE_DIR) / "viewer/screenshots_train.script"));
}

TEST_CASE("viewer script: argument rules give FILE:LINE errors", "[viewer_script]") {
  lab::test::ScratchDir dir("viewer-script-rules");
  const fs::path f = dir.path / "s.txt";
  CHECK(parse_error(f, "select_attention psa 0\n") ==
        f.string() + ":1: select_attention expects a whole number, got 'psa'");
  CHECK(parse_error(f, "# comment\nclick_pixel 3\n") == f.string() + ":2: click_pixel needs 2 argument(s)");
  CHECK(parse_error(f, "set_executor cpu extra\n") == f.string() + ":1: too many arguments for set_executor");
  CHECK(parse_error(f, "fly_to_the_moon\n") == f.string() + ":1: unknown action 'fly_to_the_moon'");
  CHECK(parse_error(f, "wait_steps many\n") == f.string() + ":1: wait_steps expects a whole number, got 'many'");
  CHECK(parse_error(f, "set_train epochs\n") == f.string() + ":1: set_train needs 2 argument(s)");
  // set_train's value is the rest of the line: a path with blanks stays whole.
  lab::test::write_file(f, "set_train data /tmp/my data/data.yaml\n");
  const auto actions = lab::viewer::parse_script(f);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].args == std::vector<std::string>{"data", "/tmp/my data/data.yaml"});
}

#endif  // LAB_VIEWER_BINARY
