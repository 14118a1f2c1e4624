// Occupancy computed without a GPU: resident blocks and warps per SM of a kernel from its registers per
// thread, shared memory and block size, under the per-architecture limits below, following the CUDA
// occupancy calculator's rules (the ones cudaOccupancyMaxActiveBlocksPerMultiprocessor applies, as written in
// the toolkit's cuda_occupancy.h) with the default shared-memory carveout (the largest).
#pragma once
#include <optional>
#include <string>

namespace lab {

// Per-SM limits of one architecture. Source: CUDA C++ Programming Guide, "Technical Specifications per
// Compute Capability" (warps, blocks, registers, shared memory per SM and per block, reserved shared memory
// per block from compute capability 8.0 on), and the occupancy calculator's allocation rules (registers in
// units of 256 per warp over 4 sub-partitions, shared memory in units of 128 bytes from 8.0, 256 before).
struct ArchLimits {
  const char* arch;
  int max_warps_per_sm;
  int max_blocks_per_sm;
  int registers_per_sm;
  int max_registers_per_block;
  int max_registers_per_thread;
  int register_unit;          // registers allocated per warp in multiples of this
  int register_partitions;    // the register file is split over this many sub-partitions
  int shared_per_sm;          // bytes, largest carveout
  int shared_per_block;       // bytes without the opt-in (static shared memory's limit)
  int shared_per_block_optin; // bytes with cudaFuncAttributeMaxDynamicSharedMemorySize
  int shared_reserved_per_block;
  int shared_unit;
};

// The limits of "sm_XX"; nullopt for an architecture the table does not know.
std::optional<ArchLimits> arch_limits(const std::string& arch);

struct StaticOccupancy {
  int blocks_per_sm = 0;
  int active_warps = 0;       // blocks_per_sm x warps per block
  int max_warps = 0;          // of the SM
  std::string limited_by;     // "registers", "shared memory", "warps", "blocks", or why none fits
};

// Occupancy of a kernel using `registers` per thread and `shared_bytes` (static + dynamic) at
// `block_threads`; `max_threads_per_block` (the kernel's launch bound, 0: none) caps the block size.
StaticOccupancy static_occupancy(const ArchLimits& limits, int registers, int shared_bytes, int block_threads,
                                 int max_threads_per_block = 0);

}  // namespace lab
