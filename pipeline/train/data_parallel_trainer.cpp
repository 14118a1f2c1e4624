// DataParallelTrainer (data_parallel_trainer.hpp).
#include "pipeline/train/data_parallel_trainer.hpp"

#include <mutex>

#include "pipeline/distributed/make_communicators.hpp"
#include "pipeline/distributed/rank_threads.hpp"
#include "pipeline/distributed/rendezvous.hpp"
#include "pipeline/train/device_list.hpp"
#include "pipeline/train/run_folder.hpp"

namespace lab::train {
namespace {

// The hooks of this process's first rank (rank 0 on the first node), and for each other rank a log that tells
// what only that rank sees (an image of its share that does not decode) as "rank R: LINE" through the first
// rank's log: the ranks run on threads of their own, so every call of a hook holds one mutex (the hooks'
// owner, e.g. the CLI's progress line, need not be thread-safe).
class SerialisedHooks {
 public:
  explicit SerialisedHooks(TrainHooks hooks) : shared_(std::make_shared<Shared>(std::move(hooks))) {}

  TrainHooks first_local() const {
    TrainHooks out;
    const TrainHooks& h = shared_->hooks;
    if (h.log) out.log = serialised(&TrainHooks::log);
    if (h.on_step) out.on_step = serialised(&TrainHooks::on_step);
    if (h.on_epoch) out.on_epoch = serialised(&TrainHooks::on_epoch);
    if (h.should_stop) out.should_stop = serialised(&TrainHooks::should_stop);
    return out;
  }
  TrainHooks other_rank(int rank) const {
    TrainHooks out;
    if (shared_->hooks.log)
      out.log = [shared = shared_, prefix = "rank " + std::to_string(rank) + ": "](const std::string& line) {
        std::lock_guard lock(shared->mutex);
        shared->hooks.log(prefix + line);
      };
    return out;
  }

 private:
  struct Shared {
    explicit Shared(TrainHooks h) : hooks(std::move(h)) {}
    std::mutex mutex;
    TrainHooks hooks;
  };
  template <typename Result, typename... Args>
  std::function<Result(Args...)> serialised(std::function<Result(Args...)> TrainHooks::*hook) const {
    return [shared = shared_, hook](Args... args) {
      std::lock_guard lock(shared->mutex);
      return (shared->hooks.*hook)(args...);
    };
  }
  std::shared_ptr<Shared> shared_;
};

}  // namespace

DataParallelTrainer::DataParallelTrainer(TrainOptions options, std::optional<std::string> resume,
                                         const RuntimeContext& context, TrainHooks hooks) {
  TrainOptions run = options;  // the run's settings: a resumed run's own, with this launch's topology
  if (resume) {
    run =
        read_args_yaml(resume_state_path(*resume, options.project).parent_path().parent_path() / "args.yaml");
    run.nnodes = options.nnodes, run.node_rank = options.node_rank;
    run.rendezvous = options.rendezvous, run.master = options.master;
  }
  check_node_options(run);  // before anything is made: the flags, then the rendezvous' own checks
  const std::unique_ptr<Rendezvous> rendezvous = make_rendezvous(run.rendezvous, run.master);
  std::vector<int> devices = device_list(run.devices, run.backend, cuda_device_count());
  if (devices.size() <= 1 && !rendezvous) {  // one rank: on the listed device, without a communicator
    RuntimeContext one = context;
    if (!devices.empty()) one.options.device = devices.front();
    trainers_.push_back(
        std::make_unique<Trainer>(std::move(options), std::move(resume), one, std::move(hooks)));
    return;
  }
  if (devices.empty()) devices.push_back(context.options.device);  // a node of one rank on the default GPU
  std::vector<Backend*> local;
  std::vector<RuntimeContext> contexts(devices.size(), context);
  for (size_t r = 0; r < devices.size(); ++r) {
    contexts[r].options.device = devices[r];  // cuda: the GPU (rank 0 validates there); cpu: unused
    backends_.push_back(make_backend(run.backend, contexts[r]));
    local.push_back(backends_.back().get());
  }
  DistributedSetup setup;
  setup.node_rank = run.node_rank, setup.node_count = run.nnodes, setup.rendezvous = rendezvous.get();
  if (rendezvous)
    setup.origin = run.rendezvous.empty() ? "--master " + run.master : "--rendezvous " + run.rendezvous;
  communicators_ = make_communicators(local, setup);
  trainers_.resize(devices.size());
  const SerialisedHooks serialised(std::move(hooks));
  for (size_t r = devices.size(); r-- > 0;) {
    backends_[r]->use_on_this_thread();  // cuda: its device current while its Trainer compiles and uploads
    trainers_[r] = std::make_unique<Trainer>(
        options, resume, contexts[r],
        r == 0 ? serialised.first_local() : serialised.other_rank(communicators_[r]->rank()),
        TrainRank{communicators_[r].get(), backends_[r].get()});
  }
}

DataParallelTrainer::~DataParallelTrainer() = default;

TrainSummary DataParallelTrainer::run() {
  if (communicators_.empty()) return trainers_.front()->run();
  std::vector<Communicator*> communicators;
  for (const auto& c : communicators_) communicators.push_back(c.get());
  std::vector<TrainSummary> summaries(trainers_.size());
  run_rank_threads(communicators, [&](int rank) {
    backends_[size_t(rank)]->use_on_this_thread();
    summaries[size_t(rank)] = trainers_[size_t(rank)]->run();
  });
  return summaries.front();
}

}  // namespace lab::train
