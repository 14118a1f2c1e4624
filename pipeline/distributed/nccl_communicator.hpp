// CUDA ranks over NCCL (loaded at run time, nccl_library.hpp): the device all-reduce is enqueued on the
// backend's current lane (Backend::native_stream) and returns at once; the host collectives stage their
// values through a small device buffer on the same stream and wait for it, polling so that a failed local
// rank (abort) or an NCCL error reported by a remote rank ends the wait with an error instead of a hang.
//
// Initialisation (make_nccl_communicators): rank 0 of the run makes the unique id, the rendezvous carries it
// to the other processes, and every local rank's communicator is made by ncclCommInitRank inside one
// ncclGroupStart/End (so one process can drive several GPUs from one thread, and the same code spans hosts).
// NCCL_NVLS_ENABLE is set to 0 when unset: NVLink SHARP multicast stays off (the lent machines demand it).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/distributed/make_communicators.hpp"
#include "pipeline/distributed/nccl_library.hpp"
#include "pipeline/distributed/thread_group.hpp"

namespace lab {

class NcclCommunicator : public Communicator {
 public:
  // Takes ownership of `comm`; `local` is shared by the communicators of this process (for abort).
  NcclCommunicator(const NcclLibrary& nccl, ncclComm_t comm, int rank, int size, Backend& backend,
                   std::shared_ptr<ThreadGroup> local);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float* device_data, size_t count) override;
  void all_reduce_sum_host(double* values, size_t count) override;
  void broadcast_host(void* bytes, size_t n, int root) override;
  void barrier() override;
  void abort(const std::string& why) noexcept override;

 private:
  void check(ncclResult_t result, const char* what) const;
  // Throws when this communicator was aborted or another local rank failed.
  void check_usable();
  // Copies `bytes` to the device staging buffer, runs `collective` on it, copies back, and waits.
  void through_device(void* bytes, size_t n,
                      const std::function<void(void* staged, cudaStream_t)>& collective);
  // Polls the stream until done; a local failure or an NCCL asynchronous error aborts this rank's
  // communicator (from its own thread) and throws.
  void wait(cudaStream_t stream);
  void abort_own_communicator() noexcept;
  cudaStream_t stream() const;

  const NcclLibrary& nccl_;
  ncclComm_t comm_;
  int rank_, size_;
  Backend& backend_;
  std::shared_ptr<ThreadGroup> local_;
  DeviceBuffer staging_;
  // Page-locked, so that the copy back is asynchronous and wait() polls (a copy to pageable memory would
  // block inside CUDA until the collective ends, which a failed peer never lets happen).
  HostBuffer pinned_;
  bool aborted_ = false;
};

// The communicators of this process's CUDA ranks (see make_communicators).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<Backend*>& local_backends, const DistributedSetup& setup);

}  // namespace lab
