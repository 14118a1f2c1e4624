// What the grad golden's tests share (test_grad_golden.cpp: the float64 reference backward;
// test_kernel_backward.cpp: the kernel backward on cuda): bus.jpg letterboxed square to 640 with its five
// labels, the model, the goldens, and the per-tensor check of parameter gradients against
// goldens/bus_train_golden.{json,safetensors}.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_tensor.hpp"
#include "pipeline/loss/loss_types.hpp"

namespace lab::test {

struct BusCase {
  std::string missing;  // non-empty: the asset that is absent
  Yolo26Model model;
  reference::RefTensor input;
  std::vector<loss::GtBox> labels;
  nlohmann::json golden, bus_loss;
};

// The model, bus.jpg letterboxed square to 640 as `lab grad --square` does, its labels, and the goldens.
BusCase load_bus_case();

// Every one of `parameters` against the golden: relative L2 <= 1e-2 against the bf16 golden (bf16 keeps about
// 3 significant digits: 2^-9 relative rounding) and its L2 norm within 1e-3 of the golden's float64 norm (a
// tensor the golden has at zero must be zero); every golden tensor present. `who` names the run in the
// printed summary.
void check_gradients_against_golden(const BusCase& bus, const std::vector<ParameterGradient>& parameters,
                                    const char* who);

}  // namespace lab::test
