// Ranks that are threads of one process, each with its own backend of any kind (the cpu emulator's, or CUDA
// without NCCL): the collectives meet in a shared ThreadGroup and sum on the host in rank order, so every
// rank gets bit-identical results and a run repeats bit for bit. Device buffers travel through the backend's
// download/upload, so on a backend with lanes call all_reduce_sum with lane 0 current.
#pragma once
#include <memory>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/distributed/communicator.hpp"
#include "pipeline/distributed/thread_group.hpp"

namespace lab {

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank, Backend& backend);

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void all_reduce_sum(float* device_data, size_t count) override;
  void all_reduce_sum_host(double* values, size_t count) override;
  void broadcast_host(void* bytes, size_t n, int root) override;
  void barrier() override;
  void abort(const std::string& why) noexcept override;

 private:
  // Publishes `data`, checks every rank gave `count` elements, and sums them in rank order: each rank sums
  // its share of the elements over all ranks and writes the sum into every rank's buffer.
  template <class T>
  void sum_in_rank_order(T* data, size_t count, const char* operation);
  // Publishes `data` with `count`, waits for every rank, and throws when the counts differ.
  void publish(void* data, size_t count, const char* operation);

  std::shared_ptr<ThreadGroup> group_;
  int rank_;
  Backend& backend_;
};

// One communicator per backend, rank i on backends[i], sharing a new group.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(const std::vector<Backend*>& backends);

}  // namespace lab
