// ThreadCommunicator: collectives of rank threads over a ThreadGroup, summed on the host in rank order.
#include "pipeline/distributed/thread_communicator.hpp"

#include <cstring>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank, Backend& backend)
    : group_(std::move(group)), rank_(rank), backend_(backend) {
  if (rank_ < 0 || rank_ >= group_->size())
    throw UsageError("rank " + std::to_string(rank_) + " is outside a group of " +
                     std::to_string(group_->size()));
}

void ThreadCommunicator::publish(void* data, size_t count, const char* operation) {
  group_->slot(rank_) = ThreadGroup::Slot{data, count};
  group_->arrive_and_wait();
  for (int r = 0; r < size(); ++r) {
    const size_t theirs = group_->slot(r).count;
    if (theirs != count)
      throw RuntimeError("rank " + std::to_string(rank_) + ": " + operation + " of " + std::to_string(count) +
                         " values, but rank " + std::to_string(r) + " gave " + std::to_string(theirs));
  }
}

template <class T>
void ThreadCommunicator::sum_in_rank_order(T* data, size_t count, const char* operation) {
  publish(data, count, operation);
  const size_t ranks = size_t(size());
  const size_t begin = count * size_t(rank_) / ranks, end = count * size_t(rank_ + 1) / ranks;
  for (size_t i = begin; i < end; ++i) {
    T sum = static_cast<T*>(group_->slot(0).data)[i];
    for (size_t r = 1; r < ranks; ++r) sum += static_cast<T*>(group_->slot(int(r)).data)[i];
    for (size_t r = 0; r < ranks; ++r) static_cast<T*>(group_->slot(int(r)).data)[i] = sum;
  }
  group_->arrive_and_wait();  // every share written, and nobody reads another rank's buffer any more
}

void ThreadCommunicator::all_reduce_sum(float* device_data, size_t count) {
  std::vector<float> values(count);
  backend_.download(values.data(), device_data, count * sizeof(float));
  sum_in_rank_order(values.data(), count, "all_reduce_sum");
  backend_.upload(device_data, values.data(), count * sizeof(float));
}

void ThreadCommunicator::all_reduce_sum_host(double* values, size_t count) {
  sum_in_rank_order(values, count, "all_reduce_sum_host");
}

void ThreadCommunicator::broadcast_host(void* bytes, size_t n, int root) {
  if (root < 0 || root >= size())
    throw UsageError("broadcast_host: root " + std::to_string(root) + " is outside a group of " +
                     std::to_string(size()));
  publish(bytes, n, "broadcast_host");
  if (rank_ != root && n) std::memcpy(bytes, group_->slot(root).data, n);
  group_->arrive_and_wait();  // the root's bytes are no longer read
}

void ThreadCommunicator::barrier() {
  backend_.synchronize();
  group_->arrive_and_wait();
}

void ThreadCommunicator::abort(const std::string& why) noexcept {
  group_->poison(rank_, why);
}

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(const std::vector<Backend*>& backends) {
  auto group = std::make_shared<ThreadGroup>(int(backends.size()));
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (size_t i = 0; i < backends.size(); ++i)
    communicators.push_back(std::make_unique<ThreadCommunicator>(group, int(i), *backends[i]));
  return communicators;
}

}  // namespace lab
