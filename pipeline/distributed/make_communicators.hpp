// The factory of a run's communicators: from the backends of this process's ranks (one per local GPU or cpu
// emulator rank) and, across processes, a rendezvous. cpu backends -> ThreadCommunicator (one process only);
// cuda backends -> NcclCommunicator (NCCL loaded at run time). docs/distributed.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/distributed/communicator.hpp"
#include "pipeline/distributed/rendezvous.hpp"

namespace lab {

struct DistributedSetup {
  // Processes of the run: this one is node_rank of node_count; every process has the same number of local
  // ranks, and global rank = node_rank * local ranks + local index.
  int node_rank = 0;
  int node_count = 1;
  Rendezvous* rendezvous = nullptr;  // required when node_count > 1
  // Prefixes the one-line errors, as the user wrote it ("--devices 0,1").
  std::string origin = "--devices";
};

// communicators[i] belongs to local_backends[i] and must be used from the thread that drives that backend
// (run_rank_threads). Throws UsageError for mixed backend kinds, cpu ranks across processes, a missing
// rendezvous, or NCCL missing ("<origin>: NCCL is not available (...)").
std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<Backend*>& local_backends,
                                                              const DistributedSetup& setup = {});

}  // namespace lab
