// Error types shared by the runtime, the runners and the CLI; each maps to one exit code.
#pragma once
#include <stdexcept>
#include <string>

namespace lab {

// Bad usage or bad input (unknown name, malformed file, parameter out of range): exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure of the machinery itself (CUDA call failed, kernel faulted, emulator deadlock): exit 1.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace lab
