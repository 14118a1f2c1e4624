// `lab bench pipeline`: the whole YOLO26 forward on our kernels, timed as one CUDA-graph replay (median over
// warm replays, CUDA events) and layer by layer (each layer's launches between two events).
#pragma once
#include <string>
#include <vector>

#include "lab/cli_state.hpp"

namespace lab {

struct PipelineBenchOptions {
  std::string model;               // empty: the usual model lookup
  std::string backend;             // empty: cuda when present, else cpu
  std::string precision = "fp32";  // of the dense convs: fp32, tf32, fp16 or bf16
  std::string layout = "auto";     // of the activations: auto, nchw or nhwc
  int batch = 1;
  int imgsz = 640;
  int iters = 0, warmup = -1;  // 0 / -1: the backend's default
  bool json = false;
  uint64_t seed = 1;
};

void bench_pipeline(const PipelineBenchOptions& options, CliState& state);

// Median, min and p90 of timings in ms (`lab bench pipeline` and `lab bench train-step`).
struct TimingStats {
  double median = 0, min = 0, p90 = 0;
};
TimingStats timing_stats(std::vector<double> ms);

}  // namespace lab
