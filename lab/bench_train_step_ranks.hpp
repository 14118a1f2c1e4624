// `lab bench train-step --devices 0,1`: the training iteration's images/s per world size (bench_train_step
// with the gradients summed over data-parallel ranks, as `lab train --devices` runs them).
#pragma once
#include "lab/bench_train_step.hpp"

namespace lab {

// One rank on the first listed device, then every listed device: each rank a thread with its own backend,
// DeviceTrainEngine and `--batch` images (the work grows with the ranks); per iteration the wall clock
// between two barriers (step() returns after its norm is downloaded); images/s = ranks * batch / median.
void bench_train_step_ranks(const TrainStepBenchOptions& options, CliState& state);

}  // namespace lab
