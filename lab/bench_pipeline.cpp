// `lab bench pipeline`: builds the network on the backend, runs one forward (compile, plan, graph capture),
// then times graph replays and, separately, every layer; prints a table or JSON.
#include "lab/bench_pipeline.hpp"

#include <algorithm>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "kernels/compare.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/executor/kernel_network.hpp"
#include "lab/precision_option.hpp"
#include "pipeline/executor/activation_layout.hpp"
#include "lab/report.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"

namespace lab {

TimingStats timing_stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  TimingStats s;
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.p90 = v[std::min(n - 1, size_t(0.9 * double(n)))];
  return s;
}

void bench_pipeline(const PipelineBenchOptions& o, CliState& state) {
  const int imgsz = rounded_imgsz(o.imgsz);
  check_batch_pixels(o.batch, imgsz);
  const Precision precision = precision_option(o.precision);
  const LayoutChoice layout_choice = parse_layout_choice(o.layout);
  const ModelLocation location = locate_model(default_model_search(o.model));
  const Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(location.path));
  const std::string backend_name = o.backend.empty() ? default_backend_name() : o.backend;
  const std::unique_ptr<Backend> backend = make_backend(backend_name, state.context());
  const bool device_timing = backend->has_device_timing();
  const bool graph_replay = backend->can_capture_graphs();
  const int iters = o.iters > 0 ? o.iters : (device_timing ? 100 : 2);
  const int warmup = o.warmup >= 0 ? o.warmup : (device_timing ? 10 : 0);
  const std::string device = backend->device().name;
  const int layer_passes = std::max(1, iters / 5);
  KernelNetwork network(model, *backend, precision, layout_choice);  // a one-line error for a layout it cannot run
  const std::string layout = layout_name(network.layout());

  // The header and a progress line before the long work (a first forward at batch 32 on the cpu takes
  // most of a minute); progress goes to stderr so that --json output stays one document.
  if (!o.json)
    std::cout << "bench pipeline: " << location.path.string() << " (" << location.origin << ") on "
              << backend_name << " (" << device << "), batch " << o.batch << ", " << imgsz << "x" << imgsz
              << ", "
              << (precision == Precision::Fp32 ? "float32" : precision_name(precision) + " dense convs")
              << ", layout " << layout << ", programmatic dependent launch "
              << (backend->programmatic_launch() ? "on" : "off (--no-pdl, or below sm_90)") << "\n"
              << std::flush;
  std::cerr << "lab: first forward (compile, plan" << (graph_replay ? ", graph capture" : "") << "), then "
            << warmup + iters << " replays and " << layer_passes << " timed layer by layer\n";

  const std::vector<float> input = random_uniform(size_t(o.batch) * 3 * imgsz * imgsz, 0.0f, 1.0f, o.seed);
  network.forward(input.data(), o.batch, imgsz, imgsz);  // compile, plan, capture
  for (int i = 0; i < warmup; ++i) network.replay_ms();
  std::vector<double> replays;
  for (int i = 0; i < iters; ++i) replays.push_back(network.replay_ms());
  const TimingStats graph = timing_stats(replays);

  // Layer by layer: the same launches, each layer between two events (launch gaps between layers excluded).
  network.set_layer_timing(true);
  std::map<std::string, std::vector<double>> per_layer;
  std::vector<std::string> order;
  for (int i = 0; i < layer_passes; ++i) {
    network.forward(input.data(), o.batch, imgsz, imgsz);
    for (const LayerTime& t : network.layer_times()) {
      if (!per_layer.count(t.name)) order.push_back(t.name);
      per_layer[t.name].push_back(t.ms);
    }
  }
  double layer_sum = 0;
  std::vector<std::pair<std::string, double>> layers;
  for (const std::string& name : order) {
    layers.push_back({name, timing_stats(per_layer[name]).median});
    layer_sum += layers.back().second;
  }
  const double images_per_s = o.batch * 1e3 / graph.median;

  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [name, ms] : layers) rows.push_back({{"layer", name}, {"median_ms", ms}});
    nlohmann::json out = {{"model", location.path.string()},
                          {"backend", backend_name},
                          {"device", device},
                          {"precision", precision_name(precision)},
                          {"layout", layout},
                          {"programmatic_launch", backend->programmatic_launch()},
                          {"batch", o.batch},
                          {"imgsz", imgsz},
                          {"iters", iters},
                          {"graph_ms", graph.median},
                          {"graph_min_ms", graph.min},
                          {"graph_p90_ms", graph.p90},
                          {"images_per_s", images_per_s},
                          {"layer_sum_ms", layer_sum},
                          {"arena_bytes", network.arena_bytes()},
                          {"layers", rows}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "activation arena: " << format_sig(double(network.arena_bytes()) / (1 << 20), 4) << " MiB\n\n"
            << "whole forward, one " << (graph_replay ? "CUDA graph replay" : "replay") << " (" << iters
            << " timed after " << warmup << " warm-up): median " << format_ms(graph.median) << ", min "
            << format_ms(graph.min) << ", p90 " << format_ms(graph.p90) << ", " << format_sig(images_per_s, 4)
            << " images/s\n\n";
  Table table({"layer", "median", "share"});
  for (const auto& [name, ms] : layers)
    table.add({name, format_ms(ms), format_fixed(100 * ms / layer_sum, 1) + " %"});
  table.add({"sum of layers", format_ms(layer_sum), "100 %"});
  table.print(std::cout);
  std::cout
      << "\n(the sum of layers times each layer between events; the graph replay also removes the launch "
         "gaps between them)\n";
}

}  // namespace lab
