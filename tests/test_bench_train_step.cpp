// `lab bench train-step` (lab/bench_train_step): one DeviceTrainEngine iteration on the cpu emulator at
// 32x32 prints the JSON record with positive timings and a finite loss at fp32, fp16 and bf16; tf32 is a
// one-line error (exit 2).
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::test::LabResult;
using lab::test::quoted;
using lab::test::run_lab;

TEST_CASE("lab bench train-step times an iteration and reports it as JSON on cpu", "[bench_train_step]") {
  const fs::path model = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  if (!fs::exists(model)) {
    WARN("skipped: " << model.string() << " is absent");
    return;
  }
  for (const std::string precision : {"fp32", "fp16", "bf16"}) {
    const LabResult r = run_lab("bench train-step --backend cpu --batch 1 --imgsz 32 --iters 1 --warmup 0 "
                                "--json --optimizer SGD --precision " +
                                precision + " --model " + quoted(model.string()));
    INFO(precision << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["optimizer"] == "SGD");
    CHECK(j["precision"] == precision);
    CHECK((j["engine"].get<std::string>().find(precision + " products") != std::string::npos) ==
          (precision != "fp32"));
    CHECK(j["batch"] == 1);
    CHECK(j["imgsz"] == 32);
    for (const char* key : {"iteration_ms", "accumulate_ms", "step_ms", "images_per_s"})
      CHECK(j[key].get<double>() > 0);
    const double loss = j["last_loss"].get<double>();
    CHECK(std::isfinite(loss));
    CHECK(loss > 0);
  }
}

TEST_CASE("lab bench train-step refuses a precision it does not run", "[bench_train_step]") {
  const LabResult r = run_lab("bench train-step --backend cpu --precision tf32");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "lab: --precision tf32: train-step runs fp32, fp16 or bf16\n");
}
