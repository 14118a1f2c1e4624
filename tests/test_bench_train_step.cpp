// `lab bench train-step` (lab/bench_train_step): one DeviceTrainEngine iteration on the cpu emulator at
// 32x32 prints the JSON record with positive timings and a finite loss at fp32, fp16 and bf16; tf32 is a
// one-line error (exit 2); --kernels and --kernels-alone add the launch profile (its timing named), whose
// per-kernel sums account for the launches of an iteration.
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

namespace {

// `flag` is --kernels or --kernels-alone, `timing` what the JSON must say of it.
void check_train_step_profile(const fs::path& model, const std::string& flag, const std::string& timing) {
  const LabResult r =
      run_lab("bench train-step --backend cpu --batch 1 --imgsz 32 --iters 1 --warmup 0 --json " + flag +
              " --model " + quoted(model.string()));
  INFO(flag << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json profile = nlohmann::json::parse(r.out).at("launch_profile");
  CHECK(profile.at("timing") == timing);
  if (timing == "alone") CHECK_THAT(r.err, Catch::Matchers::Contains("launch by launch, each launch alone"));
  const nlohmann::json& kernels = profile.at("kernels");
  REQUIRE(kernels.size() > 10);
  int launches = 0, conv_forward = 0, conv_backward = 0, upload_rows = 0;
  double sum = 0, previous = 1e300;
  for (const nlohmann::json& k : kernels) {
    const std::string name = k.at("kernel");
    const double ms = k.at("ms");
    CHECK(ms >= 0);
    if (k.at("ctas").get<unsigned long long>() > 0) CHECK(ms > 0);  // kernels; a tiny copy may read 0
    CHECK(ms <= previous);  // most time first
    previous = ms, sum += ms;
    launches += k.at("launches").get<int>();
    upload_rows += name == "(copy host->device)";
    conv_forward += name.rfind("conv2d_tiled<", 0) == 0 || name.rfind("conv2d_depthwise<", 0) == 0;
    conv_backward += name.rfind("conv2d_dgrad", 0) == 0 || name.rfind("conv2d_wgrad", 0) == 0;
  }
  CHECK(conv_forward > 0);
  CHECK(conv_backward > 0);
  CHECK(upload_rows == 1);  // the batch's and the loss's uploads: one row of copies
  CHECK(launches > 300);  // yolo26n's forward alone is over a hundred convolutions
  CHECK(profile.at("launch_ms").get<double>() == Approx(sum));
  CHECK(profile.at("span_ms").get<double>() >= sum);  // the launches ran inside the timed span
  // "launches": each launch on its own, in order: as many as the totals count, the same sum, and the
  // iteration's first launch is its forward's (the batch's upload or the input's letterbox), not a backward.
  const nlohmann::json& each = profile.at("launches");
  REQUIRE(int(each.size()) == launches);
  double each_sum = 0;
  for (const nlohmann::json& l : each) each_sum += l.at("ms").get<double>();
  CHECK(each_sum == Approx(sum));
  const std::string first = each.front().at("kernel");
  CHECK(first.rfind("conv2d_dgrad", 0) != 0);
  CHECK(first.rfind("conv2d_wgrad", 0) != 0);
}

}  // namespace

TEST_CASE("lab bench train-step --kernels and --kernels-alone sum one iteration's launches per kernel",
          "[bench_train_step]") {
  const fs::path model = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  if (!fs::exists(model)) {
    WARN("skipped: " << model.string() << " is absent");
    return;
  }
  check_train_step_profile(model, "--kernels", "as launched");
  check_train_step_profile(model, "--kernels-alone", "alone");
}

TEST_CASE("lab bench --kernels is train-step's and one device's", "[bench_train_step]") {
  const std::pair<std::string, std::string> cases[] = {
      {"pipeline --kernels", "--kernels: only train-step has a launch profile"},
      {"pipeline --kernels-alone", "--kernels-alone: only train-step has a launch profile"},
      {"train-step --kernels --devices 0,1",
       "--kernels: the launch profile runs on one device (leave out --devices)"},
      {"train-step --kernels-alone --devices 0,1",
       "--kernels-alone: the launch profile runs on one device (leave out --devices)"},
      {"train-step --kernels --kernels-alone", "--kernels excludes --kernels-alone"},
  };
  for (const auto& [args, error] : cases) {
    const LabResult r = run_lab("bench " + args + " --backend cpu");
    INFO(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "lab: " + error + "\n");
  }
}

TEST_CASE("lab bench train-step refuses a precision it does not run", "[bench_train_step]") {
  const LabResult r = run_lab("bench train-step --backend cpu --precision tf32");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "lab: --precision tf32: train-step runs fp32, fp16 or bf16\n");
}
