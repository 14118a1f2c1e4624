// `lab bench KERNEL`: median / min / p90 launch time over warm runs (Backend::time_ms per launch), achieved
// GB/s and TFLOP/s from Instance::work(), and the share of the H200 ceilings when running on an H200. Every
// benchmarked instance is checked once first (--no-check skips it: a shape whose float64 reference takes minutes).
// Without --param it benches the scenario cases marked `bench = true` for the kernel.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/bench_pipeline.hpp"
#include "lab/bench_train_step.hpp"
#include "lab/commands.hpp"
#include "lab/option_checks.hpp"
#include "lab/layout_option.hpp"
#include "lab/precision_option.hpp"
#include "harness/report_json.hpp"
#include "lab/report.hpp"
#include "harness/scenario.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

constexpr double kH200CopyBytesPerSecond = 4.2e12;
constexpr double kH200Fp32FlopsPerSecond = 60e12;

struct BenchOptions {
  std::string kernel, variant, backend;
  bool all_variants = false, json = false, no_check = false;
  std::vector<std::string> params;
  int iters = 0, warmup = -1;  // 0 / -1: the backend's default
  uint64_t seed = 1;
};

struct BenchCase {
  std::string name;
  std::string where;  // "file:line: " for scenario cases, for messages
  Params params;
  std::optional<Tolerance> tolerance;
};

struct BenchRow {
  std::string case_name, variant;
  Params params;
  WorkCounts work;
  double median = 0, min = 0, p90 = 0;
  bool pass = false, checked = true;
  std::vector<OutputCheck> checks;
};

std::vector<BenchCase> bench_cases(const BenchOptions& o, const CliState& state, const std::string& backend,
                                   std::vector<std::string>& notes) {
  if (!o.params.empty()) return {{"command line", "", parse_param_args(o.params), std::nullopt}};
  std::vector<std::string> errors;
  std::vector<BenchCase> cases;
  for (const Scenario& s : load_scenario_dir(state.scenarios_directory(), errors)) {
    if (s.kernel != o.kernel) continue;
    for (const ScenarioCase& c : s.cases) {
      if (!c.bench) continue;
      const auto& backends = c.backends.empty() ? s.backends : c.backends;
      if (!backends.empty() && std::find(backends.begin(), backends.end(), backend) == backends.end()) {
        notes.push_back("case '" + c.name + "' (" + s.path + ") is not run on " + backend);
        continue;
      }
      cases.push_back({c.name, s.path + ":" + std::to_string(c.line) + ": ", c.params, c.tolerance});
    }
  }
  for (const std::string& e : errors) notes.push_back("skipped invalid scenario file: " + e);
  if (cases.empty()) {
    notes.push_back("no scenario case of " + o.kernel + " is marked bench = true for " + backend +
                    "; benchmarking the default parameters");
    cases.push_back({"defaults", "", {}, std::nullopt});
  }
  return cases;
}

double percentile(const std::vector<double>& sorted, double q) {
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

BenchRow bench_one(const Runner& runner, Backend& backend, const BenchCase& c, const std::string& variant,
                   const BenchOptions& o, int iters, int warmup) {
  BenchRow row{c.name, variant, {}, {}, 0, 0, 0, false, !o.no_check, {}};
  try {
    row.params = resolve_params(runner, c.params);
  } catch (const UsageError& e) {
    throw UsageError(c.where + e.what());
  }
  std::unique_ptr<Instance> instance = runner.instantiate(backend, variant, row.params, o.seed);
  instance->launch();
  backend.synchronize();
  if (row.checked) {
    instance->poison();
    instance->launch();
    row.checks = instance->check(c.tolerance);
  }
  row.pass = !row.checked || all_pass(row.checks);
  for (int i = 0; i < warmup; ++i) instance->launch();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) times.push_back(backend.time_ms([&] { instance->launch(); }));
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  row.median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  row.min = times.front();
  row.p90 = percentile(times, 0.9);
  row.work = instance->work();
  return row;
}

double gbps(const BenchRow& r) {
  return r.work.bytes / (r.median * 1e-3) / 1e9;
}
double tflops(const BenchRow& r) {
  return r.work.flops / (r.median * 1e-3) / 1e12;
}

void print_rows(const std::vector<BenchRow>& rows, bool h200) {
  std::vector<std::string> headers{"case", "variant", "median", "min", "p90", "GB/s", "TFLOP/s"};
  if (h200) headers.insert(headers.end(), {"% of 4.2 TB/s", "% of 60 TFLOP/s"});
  headers.insert(headers.end(), {"speedup vs first", "check"});
  Table table(headers);
  double first_median = 0;
  std::string current_case;
  for (const BenchRow& r : rows) {
    if (r.case_name != current_case) first_median = r.median, current_case = r.case_name;
    std::vector<std::string> cells{r.case_name,
                                   r.variant,
                                   format_ms(r.median),
                                   format_ms(r.min),
                                   format_ms(r.p90),
                                   format_sig(gbps(r), 4),
                                   r.work.flops > 0 ? format_sig(tflops(r), 3) : "-"};
    if (h200) {
      cells.push_back(format_fixed(100 * gbps(r) * 1e9 / kH200CopyBytesPerSecond, 1));
      cells.push_back(r.work.flops > 0 ? format_fixed(100 * tflops(r) * 1e12 / kH200Fp32FlopsPerSecond, 1)
                                       : "-");
    }
    cells.push_back(format_fixed(first_median / r.median, 2) + "x");
    cells.push_back(!r.checked ? "not checked" : r.pass ? "PASS" : "FAIL");
    table.add(cells);
  }
  table.print(std::cout);
}

nlohmann::json rows_json(const std::vector<BenchRow>& rows, bool h200) {
  nlohmann::json out = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    nlohmann::json row = {
        {"case", r.case_name},      {"variant", r.variant},  {"params", params_json(r.params)},
        {"median_ms", r.median},    {"min_ms", r.min},       {"p90_ms", r.p90},
        {"bytes", r.work.bytes},    {"flops", r.work.flops}, {"gb_per_s", gbps(r)},
        {"tflop_per_s", tflops(r)}, {"pass", r.checked ? nlohmann::json(r.pass) : nlohmann::json()},
        {"checked", r.checked},
        {"outputs", checks_json(r.checks)}};
    if (h200) {
      row["fraction_of_copy_ceiling"] = gbps(r) * 1e9 / kH200CopyBytesPerSecond;
      row["fraction_of_fp32_ceiling"] = tflops(r) * 1e12 / kH200Fp32FlopsPerSecond;
    }
    out.push_back(row);
  }
  return out;
}

void bench(const BenchOptions& o, CliState& state) {
  const Runner& runner = Registry::instance().get(o.kernel);
  std::vector<std::string> variants;
  if (o.all_variants)
    for (const KernelVariant& v : runner.variants()) variants.push_back(v.name);
  else
    variants.push_back(resolve_variant(runner, o.variant));
  const std::string backend_name = o.backend.empty() ? default_backend_name() : o.backend;
  std::vector<std::string> notes;
  const std::vector<BenchCase> cases = bench_cases(o, state, backend_name, notes);
  const std::unique_ptr<Backend> backend = make_backend(backend_name, state.context());
  const bool device_timing = backend->has_device_timing();
  const int iters = o.iters > 0 ? o.iters : (device_timing ? 100 : 3);
  const int warmup = o.warmup >= 0 ? o.warmup : (device_timing ? 10 : 1);
  const std::string device = backend->device().name;
  const bool h200 = device.find("H200") != std::string::npos;

  std::vector<BenchRow> rows;
  for (const BenchCase& c : cases)
    for (const std::string& v : variants) {
      try {
        rows.push_back(bench_one(runner, *backend, c, v, o, iters, warmup));
      } catch (const UsageError& e) {
        // With --all-variants, a variant that cannot run a case's shape (conv2d's v3_depthwise on a dense
        // conv) is skipped with its rule; a variant asked for by name still fails.
        if (!o.all_variants) throw;
        notes.push_back("case '" + c.name + "' / " + v + " skipped: " + e.what());
      }
    }
  if (std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return !r.pass; })) state.exit_code = 1;

  if (o.json) {
    nlohmann::json out = {{"kernel", runner.name()}, {"backend", backend_name},
                          {"device", device},        {"iters", iters},
                          {"warmup", warmup},        {"h200_ceilings", h200},
                          {"notes", notes},          {"rows", rows_json(rows, h200)}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const std::string& n : notes) std::cout << "note: " << n << "\n";
  std::cout << "bench " << runner.name() << " on " << backend_name << " (" << device << "): " << iters
            << " timed launches after " << warmup << " warm-up, " << (device_timing ? "CUDA events" : "wall clock")
            << ", per launch\n";
  if (!h200)
    std::cout << "ceilings (H200: 4.2 TB/s copy, 60 TFLOP/s fp32) not shown: the device is not an H200\n";
  std::cout << "\n";
  print_rows(rows, h200);
  for (const BenchRow& r : rows) {
    if (r.pass) continue;
    std::cout << "\n" << r.case_name << " / " << r.variant << " failed its check (seed " << o.seed << "):\n";
    print_checks(std::cout, r.checks);
  }
}

}  // namespace

void add_bench_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Time a kernel over warm launches (median/min/p90, GB/s, TFLOP/s), or `pipeline`: the whole network, "
      "or `train-step`: one training iteration");
  auto o = std::make_shared<BenchOptions>();
  auto p = std::make_shared<PipelineBenchOptions>();
  auto t = std::make_shared<TrainStepBenchOptions>();
  cmd->add_option("KERNEL", o->kernel, "Runner name (see `lab list`), `pipeline` or `train-step`")
      ->required();
  cmd->add_option("--model", p->model, "pipeline, train-step: checkpoint (default: the usual model lookup)")
      ->check(not_empty());
  cmd->add_option("--batch", p->batch, "pipeline, train-step: batch size")
      ->check(batch_range())
      ->capture_default_str();
  cmd->add_option("--devices", t->devices,
                  "train-step: data-parallel ranks (0,1 or all; cpu: emulated 0..n-1), --batch images each: "
                  "images/s on one rank and on all of them");
  auto* kernels =
      cmd->add_flag("--kernels", t->kernels,
                    "train-step: then one more iteration with every launch timed as it runs, beside "
                    "the other lanes' launches, summed per kernel (where the time goes, without ncu; "
                    "a launch's time includes its neighbours' share of the GPU)");
  cmd->add_flag(
         "--kernels-alone", t->kernels_alone,
         "train-step: the same profile with each launch run alone (the GPU idle before it): its own time, "
         "the iteration one launch at a time")
      ->excludes(kernels);
  cmd->add_option("--optimizer", t->optimizer, "train-step: SGD, AdamW or MuSGD")
      ->check(CLI::IsMember({"SGD", "AdamW", "MuSGD"}))
      ->capture_default_str();
  cmd->add_option("--precision", p->precision,
                  std::string("pipeline: ") + kPrecisionHelp + "; train-step: fp32, fp16 or bf16")
      ->capture_default_str();
  cmd->add_option("--layout", p->layout, std::string("pipeline: ") + kLayoutHelp)
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}))
      ->capture_default_str();
  cmd->add_option("--imgsz", p->imgsz,
                  "pipeline, train-step: square input size (rounded up to a multiple of 32)")
      ->check(imgsz_range())
      ->capture_default_str();
  auto* variant = cmd->add_option("--variant", o->variant, "Variant (default: the runner's first)");
  cmd->add_flag("--all-variants", o->all_variants, "Every variant, side by side")->excludes(variant);
  cmd->add_option("--param", o->params,
                  "Parameter NAME=VALUE (repeatable); without any, the scenario cases marked bench = true");
  cmd->add_option("--iters", o->iters, "Timed launches (default: 100 on cuda, 3 on cpu)")
      ->check(at_least(1));
  cmd->add_option("--warmup", o->warmup, "Untimed launches first (default: 10 on cuda, 1 on cpu)")
      ->check(at_least(0));
  cmd->add_option("--backend", o->backend, "cuda or cpu (default: cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--seed", o->seed, "Seed of the random inputs")->check(at_least(0))->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_flag("--no-check", o->no_check,
                "Skip the check against the float64 CPU reference (for shapes where it takes minutes; the check "
                "column says `not checked`)");
  cmd->footer(
      "Examples:\n"
      "  lab bench flash_attn2_fwd --all-variants          # every variant on the bench = true cases\n"
      "  lab bench pipeline --batch 32 --precision fp16    # the whole network as one CUDA graph\n"
      "  lab bench train-step --batch 32 --kernels         # one iteration, then the time of every kernel\n");
  cmd->callback([&state, o, p, t] {
    const bool profile = t->kernels || t->kernels_alone;
    const std::string profile_flag = t->kernels ? "--kernels" : "--kernels-alone";
    if (o->kernel == "train-step") {
      t->precision = precision_option(p->precision);
      if (t->precision == Precision::Tf32)
        throw UsageError("--precision tf32: train-step runs fp32, fp16 or bf16");
      if (p->layout != "auto") throw UsageError("--layout " + p->layout + ": train-step runs NCHW");
      t->model = p->model, t->batch = p->batch, t->imgsz = p->imgsz, t->backend = o->backend;
      t->iters = o->iters, t->warmup = o->warmup, t->json = o->json, t->seed = o->seed;
      if (profile && !t->devices.empty())
        throw UsageError(profile_flag + ": the launch profile runs on one device (leave out --devices)");
      return bench_train_step(*t, state);
    }
    if (!t->devices.empty())
      throw UsageError("--devices " + t->devices + ": only train-step runs on several devices");
    if (profile) throw UsageError(profile_flag + ": only train-step has a launch profile");
    if (o->kernel != "pipeline") return bench(*o, state);
    p->backend = o->backend, p->iters = o->iters, p->warmup = o->warmup, p->json = o->json, p->seed = o->seed;
    bench_pipeline(*p, state);
  });
}

}  // namespace lab
