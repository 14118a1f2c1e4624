// A single updating progress line on stderr, shown only when stderr is a terminal.
#pragma once
#include <cstddef>
#include <string>

namespace lab {

class Progress {
 public:
  // `enabled` is ANDed with isatty(stderr).
  explicit Progress(bool enabled);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(size_t done, size_t total, const std::string& what);
  // Clears the line (so the next output starts on a clean line).
  void finish();

 private:
  bool enabled_;
  bool shown_ = false;
};

// Shows parallel module compiles (set_compile_progress) as a progress line on a terminal.
void show_compile_progress();

}  // namespace lab
