// `lab bench train-step`: builds DeviceTrainEngine at the batch shape, runs the warm-up iterations (the first
// compiles and allocates), then times each iteration, and its accumulate() and step() apart; prints a few
// lines or JSON; --kernels adds a launch profile of one more iteration (lab/launch_profile_report).
#include "lab/bench_train_step.hpp"
#include "lab/bench_train_step_ranks.hpp"

#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/host_memory_pool.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/train/device_train_engine.hpp"
#include "lab/bench_pipeline.hpp"
#include "lab/launch_profile_report.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"

namespace lab {

train::TrainBatch synthetic_train_batch(int batch, int imgsz, int classes, uint64_t seed,
                                        std::pmr::memory_resource& staging) {
  const std::vector<uint8_t> bytes = random_bytes(size_t(batch) * 3 * imgsz * imgsz, seed);
  train::TrainBatch b{batch, imgsz, imgsz, std::pmr::vector<uint8_t>(bytes.begin(), bytes.end(), &staging)};
  const std::vector<float> r = random_uniform(size_t(batch) * 16, 0.0f, 1.0f, seed + 1);
  for (int i = 0; i < batch; ++i) {
    std::vector<loss::GtBox> boxes;
    for (int k = 0; k < 4; ++k) {
      const float* v = &r[size_t(i * 16 + k * 4)];
      const float w = imgsz * (0.125f + 0.375f * v[0]), h = imgsz * (0.125f + 0.375f * v[1]);
      const float x = (imgsz - w) * v[2], y = (imgsz - h) * v[3];
      boxes.push_back({(i * 4 + k) % classes, x, y, x + w, y + h});
    }
    b.ground_truth.push_back(boxes);
  }
  return b;
}

namespace {

constexpr double kTimedLr = 1e-4;  // small: the timed iterations stay near the checkpoint

train::StepHyper timed_hyper() {
  train::StepHyper hyper;
  hyper.lr = {kTimedLr, kTimedLr, kTimedLr};
  return hyper;
}

struct IterationTimes {
  std::vector<double> iteration, accumulate, step;
  double loss = 0;
  std::string engine;  // DeviceTrainEngine::describe()
};

// Warm-up iterations (the first compiles and allocates), then whole iterations, then as many with
// accumulate() and step() timed apart. A whole iteration stages the next batch's images (the same bytes
// again) after its accumulate(), as lab train does, so its copy runs beside the backward and the step;
// accumulate() timed apart takes its batch unstaged (its upload included).
IterationTimes time_iterations(Backend& backend, const Yolo26Model& model, const TrainStepBenchOptions& o,
                               int imgsz, const train::TrainBatch& batch, int warmup, int iters) {
  train::DeviceTrainEngine engine(backend, model, o.optimizer, o.batch, imgsz, imgsz, o.precision);
  const loss::LossConfig config;
  const train::StepHyper hyper = timed_hyper();
  for (int i = 0; i < std::max(warmup, 1); ++i) {
    engine.accumulate(batch, config);
    engine.stage(batch);
    engine.step(hyper);
  }
  IterationTimes t;
  for (int i = 0; i < iters; ++i)
    t.iteration.push_back(backend.time_ms([&] {
      t.loss = engine.accumulate(batch, config).total;
      if (i + 1 < iters) engine.stage(batch);
      engine.step(hyper);
    }));
  for (int i = 0; i < iters; ++i) {
    t.accumulate.push_back(backend.time_ms([&] { engine.accumulate(batch, config); }));
    t.step.push_back(backend.time_ms([&] { engine.step(hyper); }));
  }
  t.engine = engine.describe();
  return t;
}

struct LaunchProfile {
  LaunchProfileTiming timing;
  std::vector<LaunchSample> samples;
  double span_ms = 0;
};

// One iteration with every launch timed: on an engine of its own, built while the profile is on, so that
// its passes are replayed functions rather than graphs (a graph replays untimed); the first iteration
// compiles and allocates, the second is the one reported.
LaunchProfile profile_iteration(Backend& backend, const Yolo26Model& model, const TrainStepBenchOptions& o,
                                int imgsz, const train::TrainBatch& batch, LaunchProfileTiming timing) {
  std::cerr << "lab: profiling one more iteration launch by launch"
            << (timing == LaunchProfileTiming::Alone ? ", each launch alone" : "") << "\n";
  backend.start_launch_profile(timing);
  try {
    train::DeviceTrainEngine engine(backend, model, o.optimizer, o.batch, imgsz, imgsz, o.precision);
    const loss::LossConfig config;
    const train::StepHyper hyper = timed_hyper();
    engine.accumulate(batch, config);
    engine.step(hyper);
    backend.synchronize();
    backend.stop_launch_profile();
    backend.start_launch_profile(timing);
    LaunchProfile p{timing};
    p.span_ms = backend.time_ms([&] {
      engine.accumulate(batch, config);
      engine.step(hyper);
    });
    p.samples = backend.stop_launch_profile();
    return p;
  } catch (...) {
    backend.stop_launch_profile();
    throw;
  }
}

}  // namespace

void bench_train_step(const TrainStepBenchOptions& o, CliState& state) {
  if (!o.devices.empty()) return bench_train_step_ranks(o, state);
  const int imgsz = rounded_imgsz(o.imgsz);
  check_batch_pixels(o.batch, imgsz);
  const ModelLocation location = locate_model(default_model_search(o.model));
  const Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(location.path));
  const std::string backend_name = o.backend.empty() ? default_backend_name() : o.backend;
  const std::unique_ptr<Backend> backend = make_backend(backend_name, state.context());
  const bool device_timing = backend->has_device_timing();
  const int iters = o.iters > 0 ? o.iters : (device_timing ? 20 : 2);
  const int warmup = o.warmup >= 0 ? o.warmup : (device_timing ? 3 : 1);
  const std::string device = backend->device().name;
  if (!o.json)
    std::cout << "bench train-step: " << location.path.string() << " (" << location.origin << ") on "
              << backend_name << " (" << device << "), batch " << o.batch << ", " << imgsz << "x" << imgsz
              << ", " << o.optimizer << ", " << precision_name(o.precision) << "\n"
              << std::flush;
  std::cerr << "lab: building the training pass, then " << std::max(warmup, 1) << " warm-up and " << iters
            << " timed iterations\n";

  HostMemoryPool staging([&backend](size_t bytes) { return backend->alloc_host(bytes); });
  const train::TrainBatch batch = synthetic_train_batch(o.batch, imgsz, model.nc, o.seed, staging);
  const IterationTimes times = time_iterations(*backend, model, o, imgsz, batch, warmup, iters);
  std::optional<LaunchProfile> profile;
  if (o.kernels || o.kernels_alone)
    profile =
        profile_iteration(*backend, model, o, imgsz, batch,
                          o.kernels_alone ? LaunchProfileTiming::Alone : LaunchProfileTiming::AsLaunched);
  const std::string& engine_text = times.engine;
  const TimingStats it = timing_stats(times.iteration), acc = timing_stats(times.accumulate),
                    st = timing_stats(times.step);
  const double loss = times.loss;
  const double images_per_s = o.batch * 1e3 / it.median;
  if (o.json) {
    nlohmann::json out = {{"model", location.path.string()},
                                {"backend", backend_name},
                                {"device", device},
                                {"optimizer", o.optimizer},
                                {"precision", precision_name(o.precision)},
                                {"engine", engine_text},
                                {"batch", o.batch},
                                {"imgsz", imgsz},
                                {"iters", iters},
                                {"iteration_ms", it.median},
                                {"iteration_min_ms", it.min},
                                {"iteration_p90_ms", it.p90},
                                {"accumulate_ms", acc.median},
                                {"step_ms", st.median},
                                {"images_per_s", images_per_s},
                                {"last_loss", loss}};
    if (profile)
      out["launch_profile"] = launch_profile_json(profile->samples, profile->span_ms, profile->timing);
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << engine_text << "\n"
            << "iteration (" << iters << " timed after " << std::max(warmup, 1) << " warm-up): median "
            << format_ms(it.median) << ", min " << format_ms(it.min) << ", p90 " << format_ms(it.p90) << ", "
            << format_sig(images_per_s, 4) << " images/s\n"
            << "  accumulate (forward, loss, backward, BatchNorm chain rule): median "
            << format_ms(acc.median) << "\n"
            << "  step (clip, " << o.optimizer << ", gradients zeroed): median " << format_ms(st.median)
            << "\n"
            << "last loss " << format_sig(loss, 6) << "\n";
  if (profile) {
    std::cout << "launch profile (one more iteration on a new engine, without graphs, "
              << (profile->timing == LaunchProfileTiming::Alone
                      ? "each launch run and timed alone"
                      : "each launch timed as launched, beside the other lanes' launches")
              << "):\n";
    print_launch_profile(std::cout, kernel_totals(profile->samples), o.kernel_rows, profile->span_ms);
  }
}

}  // namespace lab
