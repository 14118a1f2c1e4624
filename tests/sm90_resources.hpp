// The resource check the nn test files make of their modules: every entry of a compile request compiles for
// sm_90 with NVRTC (no GPU needed) using registers and no spill stores or loads.
#pragma once
#include <catch2/catch.hpp>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "tests/test_helpers.hpp"

namespace lab::test {

inline void check_compiles_for_sm90_without_spills(const CompileRequest& request) {
  const RuntimeContext ctx = embedded_context();
  const CompileResult r = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, "sm_90");
  REQUIRE(r.resources.size() == request.name_expressions.size());
  for (const ResourceUsage& u : r.resources) {
    INFO(u.kernel << ": " << u.registers.value_or(-1) << " registers, spill stores " << u.spill_stores.value_or(-1)
                  << ", loads " << u.spill_loads.value_or(-1));
    CHECK(u.registers.value_or(0) > 0);
    CHECK(u.spill_stores.value_or(1) == 0);
    CHECK(u.spill_loads.value_or(1) == 0);
  }
}

}  // namespace lab::test
