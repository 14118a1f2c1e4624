// make_communicators: picks the thread or the NCCL implementation from the local backends' kind.
#include "pipeline/distributed/make_communicators.hpp"

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/nccl_communicator.hpp"
#include "pipeline/distributed/thread_communicator.hpp"

namespace lab {

std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<Backend*>& local_backends,
                                                              const DistributedSetup& setup) {
  if (local_backends.empty()) throw UsageError(setup.origin + ": no ranks to connect");
  if (setup.node_count < 1 || setup.node_rank < 0 || setup.node_rank >= setup.node_count)
    throw UsageError(setup.origin + ": node rank " + std::to_string(setup.node_rank) + " of " +
                     std::to_string(setup.node_count) + " nodes is out of range");
  if (setup.node_count > 1 && !setup.rendezvous)
    throw UsageError(setup.origin + ": " + std::to_string(setup.node_count) +
                     " processes need a rendezvous (--rendezvous FILE or --master host:port)");
  const std::string kind = local_backends.front()->name();
  for (Backend* b : local_backends)
    if (b->name() != kind)
      throw UsageError(setup.origin + ": every rank needs the same backend, not " + kind + " and " +
                       b->name());
  if (local_backends.front()->native_stream()) return make_nccl_communicators(local_backends, setup);
  if (setup.node_count > 1)
    throw UsageError(setup.origin + ": " + kind +
                     " ranks connect only within one process; across processes "
                     "the ranks need cuda backends (NCCL)");
  return make_thread_communicators(local_backends);
}

}  // namespace lab
