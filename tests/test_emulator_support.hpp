// Shared by the emulator tests: backends over tests/emulator_kernels (with the per-build test cache), and a
// NaN-poisoned output buffer helper.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "tests/test_helpers.hpp"

namespace lab::test {

inline RuntimeContext emulator_kernels_context(bool check_bounds = false) {
  RuntimeContext c = embedded_context();
  c.tree = KernelTree::from_directory(LAB_TEST_KERNELS_DIR);
  c.options.check_bounds = check_bounds;
  return c;
}

inline std::unique_ptr<Backend> emulator_backend(bool check_bounds = false) {
  return make_backend("cpu", emulator_kernels_context(check_bounds));
}

// A device buffer of `count` floats filled with NaN, so unwritten outputs are caught.
inline DeviceBuffer poisoned_floats(Backend& backend, size_t count) {
  return backend.upload_vector(std::vector<float>(count, std::nanf("")));
}

}  // namespace lab::test
