// The communication layer of data-parallel training: one Communicator per rank, each tied to that rank's
// backend. Two implementations: ThreadCommunicator (ranks that are threads of one process, any backend: the
// cpu emulator and CI) and NcclCommunicator (CUDA ranks over NCCL, loaded at run time, in one process or
// across processes and hosts). make_communicators.hpp picks one from the backends; docs/distributed.md.
//
// Rules every implementation keeps:
// - Collective: every rank of the group calls the same operations in the same order with the same counts,
//   each from the thread that drives that rank's backend.
// - Deterministic: every rank receives bit-identical results; the thread implementation sums in rank order
//   (never arrival order), so a run repeats bit for bit.
// - Failure: a rank that fails calls abort(why) (run_rank_threads in rank_threads.hpp does it for threads);
//   the other ranks' pending and later operations then throw RuntimeError "rank K failed: <why>" instead of
//   waiting forever. Errors are lab's UsageError/RuntimeError with one line naming the rank.
#pragma once
#include <cstddef>
#include <string>

namespace lab {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // 0 .. size()-1 over every host and process of the run
  virtual int size() const = 0;

  // Sums `count` floats in place across the ranks; `device_data` is memory of this rank's backend.
  // Ordering: the reduction reads the buffer after all the work already issued on the backend's CURRENT lane
  // (Backend::use_lane) and every launch later issued on that same lane sees the sum.
  // - NCCL: enqueued on the current lane's CUDA stream and returns at once. To overlap it with later work
  //   (gradient buckets during the backward), fork a lane for communication, issue all_reduce_sum there, go
  //   on launching on another lane, and join_lanes() before the optimizer reads the gradients.
  // - threads: returns when the sum has been written (the call synchronises the backend), so it overlaps only
  //   with other threads' work.
  // The host reads the result after Backend::synchronize() (download() does it).
  virtual void all_reduce_sum(float* device_data, size_t count) = 0;

  // Sums small host values in place (a loss normaliser, counts); blocking, bit-identical on every rank.
  virtual void all_reduce_sum_host(double* values, size_t count) = 0;

  // Copies `n` bytes from rank `root`'s `bytes` into every other rank's `bytes`; blocking.
  virtual void broadcast_host(void* bytes, size_t n, int root) = 0;

  // Returns when every rank has reached it (and the work each issued before it has been synchronised).
  virtual void barrier() = 0;

  // Marks this rank as failed: the others' waits throw "rank <rank()> failed: <why>" and this communicator is
  // unusable afterwards. Safe to call from a catch block; never throws.
  virtual void abort(const std::string& why) noexcept = 0;
};

}  // namespace lab
