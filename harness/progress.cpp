// Progress line: carriage return + erase-line, truncated to a typical terminal width.
#include "harness/progress.hpp"

#include <cstdio>
#include <unistd.h>

#include "nvrtc_runtime/parallel_compile.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab {

Progress::Progress(bool enabled) : enabled_(enabled && isatty(fileno(stderr))) {}

void Progress::update(size_t done, size_t total, const std::string& what) {
  if (!enabled_) return;
  std::string line = "[" + std::to_string(done) + "/" + std::to_string(total) + "] " + printable(what);
  if (line.size() > 100) line = line.substr(0, 97) + "...";
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

void show_compile_progress() {
  static Progress line(true);
  set_compile_progress([](size_t done, size_t total, const std::string& source_path) {
    if (done == total) return line.finish();
    line.update(done, total, "compiled " + source_path);
  });
}

}  // namespace lab
