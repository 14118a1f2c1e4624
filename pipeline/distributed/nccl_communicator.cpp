// NcclCommunicator: NCCL collectives on the rank backend's CUDA stream, and their group initialisation.
#include "pipeline/distributed/nccl_communicator.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

void check_cuda(cudaError_t e, int rank, const std::string& what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError("rank " + std::to_string(rank) + ": " + what + ": " + cudaGetErrorString(e));
  }
}

int device_of(Backend& backend, const std::string& origin) {
  void* stream = backend.native_stream();
  if (!stream) throw UsageError(origin + ": NCCL needs cuda backends, not " + backend.name());
  int device = 0;
  check_cuda(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device), 0, "cudaStreamGetDevice");
  return device;
}

}  // namespace

NcclCommunicator::NcclCommunicator(const NcclLibrary& nccl, ncclComm_t comm, int rank, int size,
                                   Backend& backend, std::shared_ptr<ThreadGroup> local)
    : nccl_(nccl), comm_(comm), rank_(rank), size_(size), backend_(backend), local_(std::move(local)) {}

NcclCommunicator::~NcclCommunicator() {
  if (!aborted_) nccl_.comm_destroy(comm_);
}

cudaStream_t NcclCommunicator::stream() const {
  return static_cast<cudaStream_t>(backend_.native_stream());
}

void NcclCommunicator::check(ncclResult_t result, const char* what) const {
  if (result != ncclSuccess)
    throw RuntimeError("rank " + std::to_string(rank_) + ": " + what + ": " + nccl_.get_error_string(result));
}

void NcclCommunicator::check_usable() {
  local_->throw_if_poisoned();
  if (aborted_) throw RuntimeError("rank " + std::to_string(rank_) + ": the communicator was aborted");
}

void NcclCommunicator::all_reduce_sum(float* device_data, size_t count) {
  check_usable();
  check(nccl_.all_reduce(device_data, device_data, count, ncclFloat32, ncclSum, comm_, stream()),
        "ncclAllReduce");
}

void NcclCommunicator::through_device(void* bytes, size_t n,
                                      const std::function<void(void* staged, cudaStream_t)>& collective) {
  check_usable();
  if (staging_.bytes() < n) {
    staging_ = backend_.alloc(n);
    pinned_ = backend_.alloc_host(n);
  }
  const cudaStream_t s = stream();
  if (n) std::memcpy(pinned_.get(), bytes, n);
  check_cuda(cudaMemcpyAsync(staging_.get(), pinned_.get(), n, cudaMemcpyHostToDevice, s), rank_,
             "staging for NCCL");
  collective(staging_.get(), s);
  check_cuda(cudaMemcpyAsync(pinned_.get(), staging_.get(), n, cudaMemcpyDeviceToHost, s), rank_,
             "staging for NCCL");
  wait(s);
  if (n) std::memcpy(bytes, pinned_.get(), n);
}

void NcclCommunicator::all_reduce_sum_host(double* values, size_t count) {
  through_device(values, count * sizeof(double), [&](void* staged, cudaStream_t s) {
    check(nccl_.all_reduce(staged, staged, count, ncclFloat64, ncclSum, comm_, s), "ncclAllReduce");
  });
}

void NcclCommunicator::broadcast_host(void* bytes, size_t n, int root) {
  if (root < 0 || root >= size_)
    throw UsageError("broadcast_host: root " + std::to_string(root) + " is outside a group of " +
                     std::to_string(size_));
  through_device(bytes, n, [&](void* staged, cudaStream_t s) {
    check(nccl_.broadcast(staged, staged, n, ncclUint8, root, comm_, s), "ncclBroadcast");
  });
}

void NcclCommunicator::barrier() {
  backend_.synchronize();
  double nothing = 0;
  all_reduce_sum_host(&nothing, 1);
}

void NcclCommunicator::wait(cudaStream_t s) {
  for (;;) {
    const cudaError_t state = cudaStreamQuery(s);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) check_cuda(state, rank_, "waiting for NCCL");
    ncclResult_t async = ncclSuccess;
    nccl_.comm_get_async_error(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      abort_own_communicator();
      check(async, "NCCL reported");
    }
    try {
      local_->throw_if_poisoned();
    } catch (...) {
      abort_own_communicator();  // releases this rank's kernel that waits for the failed rank
      throw;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::abort_own_communicator() noexcept {
  if (aborted_) return;
  aborted_ = true;
  nccl_.comm_abort(comm_);
}

void NcclCommunicator::abort(const std::string& why) noexcept {
  local_->poison(rank_, why);
  abort_own_communicator();
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<Backend*>& local_backends, const DistributedSetup& setup) {
  const NcclLibrary& nccl = load_nccl(setup.origin);
  std::vector<int> devices;  // before any NCCL work: a backend without a CUDA stream fails here
  for (Backend* b : local_backends) devices.push_back(device_of(*b, setup.origin));
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  const int local = int(local_backends.size());
  const int world = setup.node_count * local;
  auto failed = [&](ncclResult_t r, const std::string& what) {
    if (r != ncclSuccess) throw RuntimeError(setup.origin + ": " + what + ": " + nccl.get_error_string(r));
  };

  ncclUniqueId id{};
  if (setup.node_rank == 0) failed(nccl.get_unique_id(&id), "ncclGetUniqueId");
  if (setup.node_count > 1) {
    std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof id);
    const std::vector<uint8_t> agreed = setup.rendezvous->exchange(setup.node_rank, setup.node_count, mine);
    if (agreed.size() != sizeof id)
      throw RuntimeError(setup.origin + ": the rendezvous carried " + std::to_string(agreed.size()) +
                         " bytes, not the " + std::to_string(sizeof id) + " of an NCCL unique id");
    std::memcpy(&id, agreed.data(), sizeof id);
  }

  int previous = 0;
  check_cuda(cudaGetDevice(&previous), 0, "cudaGetDevice");
  std::vector<ncclComm_t> comms(size_t(local), nullptr);
  failed(nccl.group_start(), "ncclGroupStart");
  ncclResult_t init = ncclSuccess;
  for (int i = 0; i < local && init == ncclSuccess; ++i) {
    cudaSetDevice(devices[size_t(i)]);
    init = nccl.comm_init_rank(&comms[size_t(i)], world, id, setup.node_rank * local + i);
  }
  const ncclResult_t end = nccl.group_end();
  cudaSetDevice(previous);
  if (init != ncclSuccess || end != ncclSuccess) {
    for (ncclComm_t c : comms)
      if (c) nccl.comm_abort(c);
    failed(init != ncclSuccess ? init : end, "ncclCommInitRank");
  }

  auto group = std::make_shared<ThreadGroup>(local);
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int i = 0; i < local; ++i)
    communicators.push_back(std::make_unique<NcclCommunicator>(
        nccl, comms[size_t(i)], setup.node_rank * local + i, world, *local_backends[size_t(i)], group));
  return communicators;
}

}  // namespace lab
