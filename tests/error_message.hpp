// The message of the `Error` that `work` throws, or "(no error)": for tests that compare a one-line error
// to the letter.
#pragma once
#include <functional>
#include <string>

namespace lab::test {

template <class Error>
std::string error_message(const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace lab::test
