// `lab train --devices`: the run's ranks, one thread each (run_rank_threads), each with its own backend (the
// GPU it names, or a cpu emulator of its own), communicator (make_communicators: NCCL between GPUs, threads
// between cpu ranks) and Trainer (TrainRank). One rank (no --devices, or a
// single device) is a plain Trainer on that device, without a communicator. Several hosts (--nnodes,
// --node-rank, --rendezvous / --master): this process is one node of the run, its ranks the global ranks
// node_rank * local ranks + local index, NCCL's id passed through the rendezvous. docs/distributed.md,
// section "data-parallel training".
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/train/trainer.hpp"

namespace lab {
class Communicator;
}

namespace lab::train {

class DataParallelTrainer {
 public:
  // Checks the multi-host flags (check_node_options, make_rendezvous), reads --resume's args.yaml for its
  // devices (the topology stays the command line's), makes the backends and communicators, then the Trainers:
  // rank 0's last (the one that creates the run folder), so that a rank that cannot start leaves nothing
  // written. `hooks` go to this process's first rank, called one at a time; the other ranks tell only what
  // their own share of the images shows (one that does not decode) through its log, as "rank R: LINE".
  DataParallelTrainer(TrainOptions options, std::optional<std::string> resume, const RuntimeContext& context,
                      TrainHooks hooks);
  ~DataParallelTrainer();

  const std::vector<std::string>& description() const { return trainers_.front()->description(); }
  int ranks() const { return int(trainers_.size()); }
  // Every rank's run; rank 0's summary. A rank that fails stops the others; its error is thrown.
  TrainSummary run();

 private:
  std::vector<std::unique_ptr<Backend>> backends_;  // declared first: they outlive what runs on them
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<std::unique_ptr<Trainer>> trainers_;  // rank order
};

}  // namespace lab::train
