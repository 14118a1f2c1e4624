// bench_train_step_ranks (bench_train_step_ranks.hpp): builds each world size's backends, communicators and
// engines, times the iterations on the rank threads, prints a line per world size or JSON.
#include "lab/bench_train_step_ranks.hpp"

#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/bench_pipeline.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"
#include "nvrtc_runtime/host_memory_pool.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/distributed/make_communicators.hpp"
#include "pipeline/distributed/rank_threads.hpp"
#include "pipeline/train/device_list.hpp"
#include "pipeline/train/device_train_engine.hpp"

namespace lab {
namespace {

using Clock = std::chrono::steady_clock;

struct WorldTiming {
  std::vector<int> devices;
  TimingStats iteration;
  double images_per_s = 0;
};

std::string device_text(const std::vector<int>& devices) {
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

// `iters` iterations after `warmup` on every rank of `devices`; rank 0's wall clock per iteration.
WorldTiming time_world(const TrainStepBenchOptions& o, CliState& state, const std::string& backend_name,
                       const Yolo26Model& model, const std::vector<int>& devices, int imgsz, int iters,
                       int warmup) {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> local;
  for (int device : devices) {
    RuntimeContext context = state.context();
    context.options.device = device;
    backends.push_back(make_backend(backend_name, context));
    local.push_back(backends.back().get());
  }
  std::vector<std::unique_ptr<Communicator>> communicators;
  if (devices.size() > 1) communicators = make_communicators(local);
  std::vector<double> ms;
  const auto rank_body = [&](int rank) {
    backends[size_t(rank)]->use_on_this_thread();
    Communicator* ranks = communicators.empty() ? nullptr : communicators[size_t(rank)].get();
    train::DeviceTrainEngine engine(*backends[size_t(rank)], model, o.optimizer, o.batch, imgsz, imgsz,
                                    o.precision, ranks);
    HostMemoryPool staging([&backends, rank](size_t bytes) { return backends[size_t(rank)]->alloc_host(bytes); });
    const train::TrainBatch batch =
        synthetic_train_batch(o.batch, imgsz, model.nc, o.seed + uint64_t(rank), staging);
    const loss::LossConfig config;
    train::StepHyper hyper;
    hyper.lr = {1e-4, 1e-4, 1e-4};  // small: the timed iterations stay near the checkpoint
    for (int i = 0; i < iters + warmup; ++i) {
      if (ranks) ranks->barrier();
      const Clock::time_point start = Clock::now();
      engine.accumulate(batch, config);
      engine.step(hyper);
      if (ranks) ranks->barrier();
      if (rank == 0 && i >= warmup)
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  };
  if (communicators.empty()) {
    rank_body(0);
  } else {
    std::vector<Communicator*> list;
    for (const auto& c : communicators) list.push_back(c.get());
    run_rank_threads(list, rank_body);
  }
  WorldTiming t{devices, timing_stats(ms), 0};
  t.images_per_s = double(devices.size()) * o.batch * 1e3 / t.iteration.median;
  return t;
}

}  // namespace

void bench_train_step_ranks(const TrainStepBenchOptions& o, CliState& state) {
  const int imgsz = rounded_imgsz(o.imgsz);
  check_batch_pixels(o.batch, imgsz);
  const std::string backend_name = o.backend.empty() ? default_backend_name() : o.backend;
  const std::vector<int> devices = train::device_list(o.devices, backend_name, cuda_device_count());
  const ModelLocation location = locate_model(default_model_search(o.model));
  const Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(location.path));
  const bool cuda = backend_name == "cuda";
  const int iters = o.iters > 0 ? o.iters : (cuda ? 20 : 2);
  const int warmup = std::max(o.warmup >= 0 ? o.warmup : (cuda ? 3 : 1), 1);
  if (!o.json)
    std::cout << "bench train-step: " << location.path.string() << " (" << location.origin << ") on "
              << backend_name << ", batch " << o.batch << " a rank, " << imgsz << "x" << imgsz << ", "
              << o.optimizer << ", " << precision_name(o.precision) << "; devices " << device_text(devices)
              << "\n"
              << std::flush;
  std::vector<std::vector<int>> worlds = {{devices.front()}};
  if (devices.size() > 1) worlds.push_back(devices);
  std::vector<WorldTiming> timings;
  nlohmann::json rows = nlohmann::json::array();
  for (const std::vector<int>& world : worlds) {
    std::cerr << "lab: " << world.size() << " rank(s): building the training passes, then " << warmup
              << " warm-up and " << iters << " timed iterations\n";
    timings.push_back(time_world(o, state, backend_name, model, world, imgsz, iters, warmup));
    const WorldTiming& t = timings.back();
    const double scaling = t.images_per_s / timings.front().images_per_s;
    rows.push_back({{"ranks", world.size()},
                    {"devices", device_text(world)},
                    {"iteration_ms", t.iteration.median},
                    {"iteration_min_ms", t.iteration.min},
                    {"iteration_p90_ms", t.iteration.p90},
                    {"images_per_s", t.images_per_s},
                    {"scaling", scaling}});
    if (!o.json)
      std::cout << world.size() << " rank(s) (devices " << device_text(world) << "): iteration median "
                << format_ms(t.iteration.median) << ", p90 " << format_ms(t.iteration.p90) << ", "
                << format_sig(t.images_per_s, 4) << " images/s"
                << (timings.size() > 1 ? ", " + format_sig(scaling, 3) + "x one rank" : "") << "\n";
  }
  if (o.json) {
    const nlohmann::json out = {{"model", location.path.string()},
                                {"backend", backend_name},
                                {"optimizer", o.optimizer},
                                {"precision", precision_name(o.precision)},
                                {"batch_per_rank", o.batch},
                                {"imgsz", imgsz},
                                {"iters", iters},
                                {"world_sizes", rows}};
    std::cout << out.dump(2) << "\n";
  }
}

}  // namespace lab
