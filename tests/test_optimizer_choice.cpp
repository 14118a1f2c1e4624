// Ultralytics' optimizer choice (kernels/optim/optimizer_choice.hpp): the `auto` rule on both sides of
// 10000 iterations and its lr fit for several class counts (values worked by hand from the formula), named
// optimizers in any case, an unknown name, and the nominal-batch accumulation, iterations and decay.
#include <catch2/catch.hpp>

#include "kernels/optim/optimizer_choice.hpp"
#include "nvrtc_runtime/errors.hpp"

using namespace lab;

TEST_CASE("optimizer auto picks AdamW with the fitted lr up to 10000 iterations, MuSGD beyond", "[optim]") {
  // 0.01 / 84 = 0.00011905; 0.01 / 7 = 0.00142857; 0.01 / 5 = 0.002.
  for (auto [nc, lr] : {std::pair{80, 0.000119}, std::pair{3, 0.001429}, std::pair{1, 0.002}}) {
    const OptimizerChoice c = choose_optimizer("auto", 0.5, 0.5, 10000, nc);
    CHECK(c.name == "AdamW");
    CHECK(c.lr == Approx(lr).epsilon(1e-12));
    CHECK(c.momentum == 0.9);
    CHECK(c.zero_warmup_bias_lr);
  }
  const OptimizerChoice longer = choose_optimizer("AUTO", 0.5, 0.5, 10001, 80);
  CHECK(longer.name == "MuSGD");
  CHECK(longer.lr == 0.01);
  CHECK(longer.momentum == 0.9);
}

TEST_CASE("a named optimizer keeps lr0 and momentum, an unknown name is a one-line error", "[optim]") {
  const OptimizerChoice sgd = choose_optimizer("sgd", 0.02, 0.937, 50000, 80);
  CHECK(sgd.name == "SGD");
  CHECK(sgd.lr == 0.02);
  CHECK(sgd.momentum == 0.937);
  CHECK_FALSE(sgd.zero_warmup_bias_lr);
  CHECK(choose_optimizer("adamw", 0.001, 0.9, 1, 1).name == "AdamW");
  CHECK_THROWS_WITH(choose_optimizer("Adagrad", 0.01, 0.9, 1, 1),
                    "--optimizer Adagrad is not one of auto, SGD, AdamW, MuSGD");
}

TEST_CASE("nominal batch 64: accumulation, the iterations auto reads, and group 0's decay", "[optim]") {
  CHECK(nominal_accumulation(16, 64) == 4);
  CHECK(nominal_accumulation(24, 64) == 3);   // round(2.67)
  CHECK(nominal_accumulation(128, 64) == 1);  // round(0.5) = 0 (half to even), at least 1
  CHECK(nominal_accumulation(1, 64) == 64);
  CHECK(auto_rule_iterations(2000, 16, 64, 100) == 3200);  // ceil(2000 / 64) = 32 per epoch
  CHECK(auto_rule_iterations(2000, 128, 64, 10) == 160);   // ceil(2000 / 128) = 16
  CHECK(scaled_weight_decay(0.0005, 16, 64) == Approx(0.0005));
  CHECK(scaled_weight_decay(0.0005, 24, 64) == Approx(0.0005625));  // 24 * 3 / 64
}
