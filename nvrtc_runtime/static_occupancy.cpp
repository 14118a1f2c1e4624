// The static occupancy calculator and its limits table.
#include "nvrtc_runtime/static_occupancy.hpp"

#include <algorithm>
#include <array>
#include <climits>

namespace lab {

namespace {

constexpr int kKiB = 1024;
constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;

// CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"; allocation units from the
// occupancy calculator. Columns: warps/SM, blocks/SM, registers/SM, registers/block, registers/thread,
// register unit, register sub-partitions, shared/SM, shared/block, shared/block opt-in, reserved/block,
// shared unit.
constexpr std::array<ArchLimits, 7> kArchLimits{{
    {"sm_70", 64, 32, 65536, 65536, 255, 256, 4, 96 * kKiB, 48 * kKiB, 96 * kKiB, 0, 256},
    {"sm_75", 32, 16, 65536, 65536, 255, 256, 4, 64 * kKiB, 48 * kKiB, 64 * kKiB, 0, 256},
    {"sm_80", 64, 32, 65536, 65536, 255, 256, 4, 164 * kKiB, 48 * kKiB, 163 * kKiB, kKiB, 128},
    {"sm_86", 48, 16, 65536, 65536, 255, 256, 4, 100 * kKiB, 48 * kKiB, 99 * kKiB, kKiB, 128},
    {"sm_89", 48, 24, 65536, 65536, 255, 256, 4, 100 * kKiB, 48 * kKiB, 99 * kKiB, kKiB, 128},
    {"sm_90", 64, 32, 65536, 65536, 255, 256, 4, 228 * kKiB, 48 * kKiB, 227 * kKiB, kKiB, 128},
    {"sm_100", 64, 32, 65536, 65536, 255, 256, 4, 228 * kKiB, 48 * kKiB, 227 * kKiB, kKiB, 128},
}};

int round_up(int value, int unit) {
  return (value + unit - 1) / unit * unit;
}

StaticOccupancy none_fits(const ArchLimits& limits, std::string why) {
  return {0, 0, limits.max_warps_per_sm, std::move(why)};
}

}  // namespace

std::optional<ArchLimits> arch_limits(const std::string& arch) {
  for (const ArchLimits& l : kArchLimits)
    if (arch == l.arch) return l;
  return std::nullopt;
}

StaticOccupancy static_occupancy(const ArchLimits& limits, int registers, int shared_bytes, int block_threads,
                                 int max_threads_per_block) {
  const int thread_limit = max_threads_per_block > 0 ? max_threads_per_block : kMaxThreadsPerBlock;
  if (block_threads <= 0 || block_threads > thread_limit)
    return none_fits(limits, "block size above the kernel's " + std::to_string(thread_limit) + " threads");
  const int warps_per_block = (block_threads + kWarpSize - 1) / kWarpSize;

  int by_registers = INT_MAX;
  if (registers > limits.max_registers_per_thread) return none_fits(limits, "registers per thread");
  if (registers > 0) {
    const int per_warp = round_up(registers * kWarpSize, limits.register_unit);
    // The hardware checks a block against the per-block register limit as if its warps filled every
    // sub-partition evenly.
    if (per_warp * round_up(warps_per_block, limits.register_partitions) > limits.max_registers_per_block)
      return none_fits(limits, "registers per block");
    const int warps_per_partition = limits.registers_per_sm / limits.register_partitions / per_warp;
    by_registers = warps_per_partition * limits.register_partitions / warps_per_block;
  }

  const int shared = round_up(shared_bytes + limits.shared_reserved_per_block, limits.shared_unit);
  if (shared_bytes > limits.shared_per_block_optin) return none_fits(limits, "shared memory per block");
  const int by_shared = shared > 0 ? limits.shared_per_sm / shared : INT_MAX;

  const std::array<std::pair<int, const char*>, 4> bounds{{
      {limits.max_warps_per_sm / warps_per_block, "warps"},
      {limits.max_blocks_per_sm, "blocks"},
      {by_registers, "registers"},
      {by_shared, "shared memory"},
  }};
  const auto tightest =
      std::min_element(bounds.begin(), bounds.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (tightest->first == 0) return none_fits(limits, tightest->second);
  return {tightest->first, tightest->first * warps_per_block, limits.max_warps_per_sm, tightest->second};
}

}  // namespace lab
