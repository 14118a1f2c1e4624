// Test helpers: scratch directories and runtime contexts with private caches.
#include "tests/test_helpers.hpp"

#include <cstdlib>
#include <random>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

namespace lab::test {

namespace fs = std::filesystem;

ScratchDir::ScratchDir(const std::string& label) {
  std::random_device rd;
  path = fs::temp_directory_path() /
         ("lab-test-" + label + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

RuntimeContext make_context(std::shared_ptr<KernelTree> tree, const fs::path& cache_dir, bool check_bounds) {
  RuntimeContext c;
  c.tree = std::move(tree);
  c.cache = std::make_shared<DiskCache>(cache_dir);
  c.options.check_bounds = check_bounds;
  return c;
}

RuntimeContext embedded_context() {
  // One cache per build tree: repeated test runs reuse compiled kernels, as users' runs do.
  static const fs::path cache = fs::temp_directory_path() / ("lab-test-cache-" + std::to_string(::getuid()));
  return make_context(KernelTree::embedded(), cache);
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

LabResult run_command(const std::string& command) {
  ScratchDir io("command-io");
  const std::string redirected =
      command + " >" + quoted((io.path / "out").string()) + " 2>" + quoted((io.path / "err").string());
  const int status = std::system(redirected.c_str());
  LabResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(io.path / "out");
  r.err = read_text(io.path / "err");
  return r;
}

pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

LabResult run_lab(const std::string& args) {
  const fs::path cache = fs::temp_directory_path() / ("lab-test-cache-" + std::to_string(::getuid()));
  return run_command("env -u LAB_KERNELS_DIR -u LAB_SCENARIOS_DIR -u LAB_MODEL -u LAB_MODEL_URL LAB_CACHE_DIR=" +
                     quoted(cache.string()) + " " + quoted(LAB_BINARY) + " " + args);
}

}  // namespace lab::test
