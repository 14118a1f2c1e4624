// The `lab` binary as a user runs it (a subprocess): verbs, --json, and the exit codes and one-line messages
// for every bad input of the spec (unknown kernel / variant / parameter, a rule broken, malformed scenario
// TOML, a kernel that fails to compile from --kernels-dir, --backend cuda without a GPU); did-you-mean for
// typos, --version, range messages in words, `list KERNEL`, --verbose compile lines, --help examples and
// the progress of `bench pipeline`.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/runner.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using lab::test::contains;
using lab::test::LabResult;
using lab::test::quoted;
using lab::test::read_text;
using lab::test::run_lab;

size_t line_count(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// A copy of the repository's kernel tree (.cu / .cuh only) that a test may edit.
fs::path copy_kernel_tree(const fs::path& into) {
  const fs::path src = fs::path(LAB_SOURCE_DIR) / "kernels";
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cu" && ext != ".cuh")) continue;
    const fs::path dst = into / fs::relative(e.path(), src);
    fs::create_directories(dst.parent_path());
    fs::copy_file(e.path(), dst);
  }
  return into;
}

const std::string kKernel = "detect_decode";

}  // namespace

TEST_CASE("lab --help and every verb's --help exit 0", "[cli]") {
  for (const char* verb : {"", "list", "source", "run", "bench", "cache", "cache list", "cache clear",
                           "scenario", "scenario run", "scenario list", "demo"}) {
    INFO("lab " << verb << " --help");
    const LabResult r = run_lab(std::string(verb) + " --help");
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "Usage"));
  }
}

TEST_CASE("lab list prints every runner, and as JSON", "[cli]") {
  const LabResult text = run_lab("list");
  REQUIRE(text.exit_code == 0);
  for (const lab::Runner* runner : lab::Registry::instance().all()) {
    CHECK(contains(text.out, runner->name()));
    CHECK(contains(text.out, runner->source_path()));
  }
  const LabResult json = run_lab("list --json");
  REQUIRE(json.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json.out);
  REQUIRE(parsed.size() == lab::Registry::instance().all().size());
  for (const auto& r : parsed) {
    CHECK(r["variants"].size() >= 1);
    CHECK(r["variants"][0]["default"] == true);
    CHECK(r.contains("params"));
    CHECK(r.contains("scenarios"));
  }
}

TEST_CASE("bad usage exits 2 with one line", "[cli]") {
  SECTION("no verb") {
    const LabResult r = run_lab("");
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("lab: ", 0) == 0);
  }
  SECTION("unknown verb") {
    const LabResult r = run_lab("frobnicate");
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
  }
  SECTION("missing kernel argument") {
    const LabResult r = run_lab("run");
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
  }
  SECTION("--param without '='") {
    const LabResult r = run_lab("run " + kKernel + " --backend cpu --param B");
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "NAME=VALUE"));
  }
  SECTION("an unknown --precision, for detect and bench pipeline") {
    for (const std::string cmd : {"detect --backend cpu", "bench pipeline --backend cpu"}) {
      const LabResult r = run_lab(cmd + " --precision fp8");
      INFO(cmd);
      CHECK(r.exit_code == 2);
      CHECK(r.err == "lab: --precision fp8: unknown (valid: fp32, tf32, fp16, bf16)\n");
    }
  }
}

TEST_CASE("unknown kernel, variant and parameter exit 2 with a one-line hint at the valid names", "[cli]") {
  const lab::Runner& runner = lab::Registry::instance().get(kKernel);
  SECTION("kernel") {
    const LabResult r = run_lab("run no_such_kernel --backend cpu");
    CHECK(r.exit_code == 2);
    CHECK(r.err == "lab: unknown kernel 'no_such_kernel' (`lab list` names the " +
                       std::to_string(lab::Registry::instance().all().size()) + " kernels)\n");
  }
  SECTION("variant") {
    for (const char* verb : {"run", "source", "bench"}) {
      const LabResult r = run_lab(std::string(verb) + " " + kKernel + " --variant no_such_variant");
      CHECK(r.exit_code == 2);
      CHECK(line_count(r.err) == 1);
      CHECK(contains(r.err, "unknown variant 'no_such_variant'"));
      CHECK(contains(r.err, runner.variants().front().name));
    }
  }
  SECTION("parameter") {
    const LabResult r = run_lab("run " + kKernel + " --backend cpu --param NO_SUCH=1");
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(contains(r.err, "unknown parameter 'NO_SUCH'"));
    for (const lab::ParamSpec& p : runner.params()) CHECK(contains(r.err, p.name));
  }
}

TEST_CASE("a parameter that breaks its rule exits 2 stating the rule", "[cli]") {
  // detect_decode's BLOCK must be a power of two; IMG_W a multiple of 32 (a cross-parameter rule).
  const LabResult pow2 = run_lab("run " + kKernel + " --backend cpu --param BLOCK=96");
  CHECK(pow2.exit_code == 2);
  CHECK(line_count(pow2.err) == 1);
  CHECK(contains(pow2.err, "BLOCK=96"));
  CHECK(contains(pow2.err, "power of two"));
  const LabResult range = run_lab("source " + kKernel + " --param B=0");
  CHECK(range.exit_code == 2);
  CHECK(contains(range.err, "B=0"));
  const LabResult multiple = run_lab("run " + kKernel + " --backend cpu --param IMG_W=100");
  CHECK(multiple.exit_code == 2);
  CHECK(contains(multiple.err, "multiple of 32"));
}

TEST_CASE("malformed scenario TOML exits 2 with file:line", "[cli]") {
  lab::test::ScratchDir dir("cli-toml");
  const fs::path syntax = dir.path / "syntax.toml";
  lab::test::write_file(syntax,
                        "kernel = \"detect_decode\"\n\n[[case]]\nname = \"oops\nparams = { B = 1 }\n");
  const LabResult r1 = run_lab("scenario run " + quoted(syntax.string()));
  CHECK(r1.exit_code == 2);
  CHECK(line_count(r1.err) == 1);
  CHECK(contains(r1.err, syntax.string() + ":4:"));

  const fs::path unknown = dir.path / "unknown.toml";
  lab::test::write_file(unknown, "kernel = \"detect_decode\"\n[[case]]\nname = \"a\"\nparmas = { B = 1 }\n");
  const LabResult r2 = run_lab("scenario run " + quoted(unknown.string()));
  CHECK(r2.exit_code == 2);
  CHECK(contains(r2.err, unknown.string() + ":4: unknown key 'parmas'"));

  const fs::path bad_value = dir.path / "bad_value.toml";
  lab::test::write_file(
      bad_value,
      "kernel = \"detect_decode\"\n\n[[case]]\nname = \"fine\"\n\n[[case]]\nname = \"bad\"\n"
      "params = { BLOCK = 100 }\n");
  const LabResult r3 = run_lab("scenario run " + quoted(bad_value.string()));
  CHECK(r3.exit_code == 2);
  CHECK(contains(r3.err, bad_value.string() + ":6: case 'bad'"));
  CHECK(contains(r3.err, "power of two"));

  const LabResult missing = run_lab("scenario run " + quoted((dir.path / "absent.toml").string()));
  CHECK(missing.exit_code == 2);
}

TEST_CASE("a kernel that fails to compile from --kernels-dir exits 1 with file:line:col and the message",
          "[cli]") {
  lab::test::ScratchDir dir("cli-broken");
  const fs::path tree = copy_kernel_tree(dir.path / "kernels");
  const std::string source = lab::Registry::instance().get(kKernel).source_path();
  std::string text = read_text(tree / source);
  if (!text.empty() && text.back() != '\n') text += '\n';
  const size_t broken_line = line_count(text) + 1;
  lab::test::write_file(tree / source,
                        text + "__global__ void lab_broken(float* x) { x[0] = undefined_name; }\n");
  const std::string where = source + ":" + std::to_string(broken_line) + ":";

  SECTION("NVRTC (lab source --ptx)") {
    const LabResult r = run_lab("source " + kKernel + " --ptx --kernels-dir " + quoted(tree.string()));
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, where));
    CHECK(contains(r.err, "error"));
    CHECK(contains(r.err, "undefined_name"));
  }
  SECTION("cpu backend (lab run)") {
    const LabResult r = run_lab("run " + kKernel + " --backend cpu --kernels-dir " + quoted(tree.string()));
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, where));
    CHECK(contains(r.err, "undefined_name"));
  }
}

TEST_CASE("a cpu kernel that faults or never finishes ends lab with one line naming it, exit 1", "[cli]") {
  lab::test::ScratchDir dir("cli-wild-kernel");
  const fs::path tree = copy_kernel_tree(dir.path / "kernels");
  const std::string source = lab::Registry::instance().get(kKernel).source_path();
  const std::string text = read_text(tree / source);
  const std::string after = "  if (a >= anchors) return;\n";
  REQUIRE(text.find(after) != std::string::npos);
  auto insert_into_kernel = [&](const std::string& line) {
    std::string changed = text;
    changed.insert(changed.find(after) + after.size(), line);
    lab::test::write_file(tree / source, changed);
  };
  const std::string run = "run " + kKernel + " --backend cpu --kernels-dir " + quoted(tree.string());
  const std::string where = "lab: kernel detect_decode_v1_fused block (0,0,0): thread (0,0,0)";

  SECTION("a write 1 TiB before a buffer, without --check-bounds") {
    insert_into_kernel("  if (a == 0) out[-(1LL << 38)] = 1.0f;\n");
    const LabResult r = run_lab(run);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, where + ": invalid memory access: address 0x"));
    CHECK(line_count(r.err) == 1);
  }
  SECTION("a write 8 KiB past a buffer, with --check-bounds") {
    insert_into_kernel("  if (a == 0) out[4 * anchors + 2048] = 1.0f;\n");
    const LabResult r = run_lab(run + " --param B=1 --check-bounds");
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, where + ": out-of-bounds access: byte "));
    CHECK(contains(r.err, " (the word at byte 32 of argument 0 (lab::DetectDecodeParams)), 8192 bytes past its end"));
    CHECK(line_count(r.err) == 1);
  }
  SECTION("an infinite loop, with --timeout") {
    insert_into_kernel("  if (a == 0) for (volatile int spin = 0;; spin = spin + 1) {}\n");
    const LabResult r = run_lab(run + " --timeout 0.5");
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "lab: kernel detect_decode_v1_fused block (0,0,0) thread (0,0,0) made no progress in 0.5 s"));
    CHECK(line_count(r.err) == 1);
  }
  SECTION("--timeout takes a number of seconds, 0 or more") {
    const LabResult r = run_lab(run + " --timeout -1");
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--timeout"));
  }
}

TEST_CASE("without a GPU, --backend cuda exits 2 with one line", "[cli]") {
  if (lab::cuda_device_present()) {
    WARN("skipped: this machine has a CUDA device");
    return;
  }
  for (const std::string& args :
       {"run " + kKernel + " --backend cuda", "bench " + kKernel + " --backend cuda",
        "scenario run " + quoted(std::string(LAB_SOURCE_DIR) + "/CMakeLists.txt") + " --backend cuda"}) {
    INFO("lab " << args);
    const LabResult r = run_lab(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == "lab: no CUDA device is available\n");
  }
}

TEST_CASE("lab source shows the specialised text and its PTX, resources and SASS", "[cli]") {
  const lab::Runner& runner = lab::Registry::instance().get(kKernel);
  const LabResult cuda = run_lab("source " + kKernel + " --arch sm_90");
  REQUIRE(cuda.exit_code == 0);
  CHECK(contains(cuda.out, "--gpu-architecture=sm_90"));
  CHECK(contains(cuda.out, "// ===== " + runner.source_path() + " ====="));
  CHECK(contains(cuda.out, "// ===== common/lab.cuh ====="));
  for (const std::string& e :
       runner.compile_request(runner.variants().front().name, lab::resolve_params(runner, {}))
           .name_expressions)
    CHECK(contains(cuda.out, "//   " + e));

  const LabResult ptx = run_lab("source " + kKernel + " --ptx --arch sm_90");
  REQUIRE(ptx.exit_code == 0);
  CHECK(contains(ptx.out, ".entry"));
  CHECK(contains(ptx.out, ".target sm_90"));

  const LabResult res = run_lab("source " + kKernel + " --resources --arch sm_90");
  REQUIRE(res.exit_code == 0);
  CHECK(contains(res.out, "regs"));
  CHECK(contains(res.out, "cache hit"));  // the --ptx call above stored it
  const LabResult res_json = run_lab("source " + kKernel + " --resources --arch sm_90 --json");
  REQUIRE(res_json.exit_code == 0);
  CHECK(nlohmann::json::parse(res_json.out)[0]["kernels"][0]["registers"].get<int>() > 0);

  // nvdisasm comes with scripts/install-deps.sh (the nvidia-cuda-nvdisasm wheel) on machines without it.
  const LabResult sass = run_lab("source " + kKernel + " --sass --arch sm_90");
  REQUIRE(sass.exit_code == 0);
  CHECK(contains(sass.out, ".text._Z22detect_decode_v1_fused"));
  CHECK(contains(sass.out, "EXIT"));

  const LabResult both = run_lab("source " + kKernel + " --ptx --sass");
  CHECK(both.exit_code == 2);
}

TEST_CASE("lab cache shows, lists and clears its directory", "[cli]") {
  lab::test::ScratchDir dir("cli-cache");
  const std::string cache = "--cache-dir " + quoted((dir.path / "c").string());
  CHECK(run_lab("cache " + cache).out == (dir.path / "c").string() + "\n");
  REQUIRE(run_lab("source " + kKernel + " --ptx --arch sm_90 " + cache).exit_code == 0);
  const LabResult list = run_lab("cache list --json " + cache);
  REQUIRE(list.exit_code == 0);
  CHECK(nlohmann::json::parse(list.out)["entries"].size() == 1);
  const LabResult clear = run_lab("cache clear " + cache);
  CHECK(clear.exit_code == 0);
  CHECK(contains(clear.out, "removed 1 entries"));
  CHECK(nlohmann::json::parse(run_lab("cache list --json " + cache).out)["entries"].empty());
}

TEST_CASE("lab run checks a kernel on the cpu backend, text and JSON", "[cli][emulator]") {
  const LabResult text = run_lab("run " + kKernel + " --backend cpu --param B=2 --seed 7");
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "PASS"));
  CHECK(contains(text.out, "seed 7"));
  const LabResult json = run_lab("run " + kKernel + " --backend cpu --json");
  REQUIRE(json.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["pass"] == true);
  CHECK(parsed["backend"] == "cpu");
  CHECK(parsed["outputs"].size() >= 1);
}

TEST_CASE("lab scenario run prints a summary and exits 1 when a check fails", "[cli][emulator]") {
  lab::test::ScratchDir dir("cli-scenario");
  // A passing case and one that fails (a zero tolerance), the failing one optionally marked bench = true.
  const auto scenario = [](bool exact_is_bench) {
    return std::string(
               "kernel = \"detect_decode\"\nbackends = [\"cpu\"]\n[[case]]\nname = \"loose\"\n"
               "params = { B = 1, IMG_H = 64, IMG_W = 96 }\n[[case]]\nname = \"exact\"\n"
               "params = { B = 1, IMG_H = 64, IMG_W = 96 }\ntolerance = { rel_l2 = 0, max_abs = 0 }\n") +
           (exact_is_bench ? "bench = true\n" : "");
  };
  const fs::path file = dir.path / "tight.toml";
  lab::test::write_file(file, scenario(false));
  const size_t variants = lab::Registry::instance().get(kKernel).variants().size();
  const LabResult text = run_lab("scenario run " + quoted(file.string()));
  INFO(text.out << text.err);
  CHECK(text.exit_code == 1);
  CHECK(contains(text.out, "PASS"));
  CHECK(contains(text.out, "FAIL"));
  CHECK(contains(text.out, std::to_string(variants) + " passed, " + std::to_string(variants) + " failed"));
  CHECK(contains(text.out, file.string() + ":6: detect_decode / exact"));
  const LabResult json = run_lab("scenario run --json " + quoted(file.string()));
  CHECK(json.exit_code == 1);
  const auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["failed"] == variants);
  CHECK(parsed["runs"].size() == 2 * variants);

  // --no-bench-cases leaves out the failing case once it is marked bench = true, and says so.
  const fs::path marked = dir.path / "marked.toml";
  lab::test::write_file(marked, scenario(true));
  CHECK(run_lab("scenario run " + quoted(marked.string())).exit_code == 1);
  const LabResult skipped = run_lab("scenario run --json --no-bench-cases " + quoted(marked.string()));
  INFO(skipped.out << skipped.err);
  CHECK(skipped.exit_code == 0);
  const auto left = nlohmann::json::parse(skipped.out);
  CHECK(left["runs"].size() == variants);
  CHECK(left["failed"] == 0);
  REQUIRE(left["skipped"].size() == 1);
  CHECK(contains(left["skipped"][0].get<std::string>(), "1 bench case(s) not run (--no-bench-cases)"));
}

TEST_CASE("lab bench times a kernel on the cpu backend", "[cli][emulator]") {
  const LabResult r = run_lab("bench " + kKernel + " --backend cpu --iters 2 --warmup 0 --param B=1 --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto parsed = nlohmann::json::parse(r.out);
  REQUIRE(parsed["rows"].size() == 1);
  CHECK(parsed["rows"][0]["median_ms"].get<double>() > 0);
  CHECK(parsed["rows"][0]["gb_per_s"].get<double>() > 0);
  CHECK(parsed["rows"][0]["pass"] == true);
  const LabResult text = run_lab("bench " + kKernel + " --backend cpu --iters 1 --param B=1");
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "not an H200"));
}

TEST_CASE("lab bench --no-check times without the reference check and says so", "[cli][emulator]") {
  const LabResult r =
      run_lab("bench " + kKernel + " --backend cpu --iters 1 --warmup 0 --param B=1 --no-check --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto row = nlohmann::json::parse(r.out)["rows"][0];
  CHECK(row["checked"] == false);
  CHECK(row["pass"].is_null());
  CHECK(row["outputs"].empty());
  const LabResult text = run_lab("bench " + kKernel + " --backend cpu --iters 1 --param B=1 --no-check");
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "not checked"));
  CHECK_FALSE(contains(text.out, "PASS"));
}

TEST_CASE("lab run and bench pass on the GPU", "[gpu][cli]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const LabResult run = run_lab("run " + kKernel + " --backend cuda --json");
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(nlohmann::json::parse(run.out)["pass"] == true);
  const LabResult bench = run_lab("bench " + kKernel + " --backend cuda --all-variants --iters 5 --json");
  INFO(bench.out << bench.err);
  REQUIRE(bench.exit_code == 0);
  CHECK(nlohmann::json::parse(bench.out)["rows"].size() ==
        lab::Registry::instance().get(kKernel).variants().size());
}

TEST_CASE("lab bench --all-variants skips a variant that cannot run a case and names its rule", "[cli]") {
  const LabResult r = run_lab("bench conv2d --all-variants --backend cpu --iters 1 --warmup 0");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "v3_depthwise skipped: "));
  CHECK(contains(r.out, "v3_depthwise needs groups = c_in = c_out"));
  CHECK(contains(r.out, "v2_tiled"));
  const LabResult named = run_lab("bench conv2d --variant v3_depthwise --backend cpu --iters 1");
  CHECK(named.exit_code == 2);
}

TEST_CASE("lab bench pipeline and lab detect run the fp16 and bf16 networks and say so, with the layout auto "
          "picked (nhwc on the cpu emulator)",
          "[cli]") {
  const fs::path model = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  if (!fs::exists(model)) {
    WARN("skipped: " << model.string() << " is absent");
    return;
  }
  for (const std::string precision : {"fp16", "bf16"}) {
    INFO(precision);
    const LabResult bench = run_lab(
        "bench pipeline --backend cpu --imgsz 64 --iters 1 --warmup 0 --json --model " +
        quoted(model.string()) + " --precision " + precision + (precision == "bf16" ? " --no-pdl" : ""));
    INFO(bench.err);
    REQUIRE(bench.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(bench.out);
    CHECK(j["precision"] == precision);
    CHECK(j["layout"] == "nhwc");
    CHECK(j["programmatic_launch"] == (precision == "fp16"));  // bf16 ran with --no-pdl
    CHECK(j["graph_ms"].get<double>() > 0);
    CHECK(!j["layers"].empty());

    lab::test::ScratchDir dir("detect-" + precision);
    const LabResult detect =
        run_lab("detect " + quoted((fs::path(LAB_ASSETS_DIR) / "images" / "bus.jpg").string()) +
                " --backend cpu --imgsz 96 --model " + quoted(model.string()) + " --precision " + precision +
                " --out " + quoted(dir.path.string()));
    INFO(detect.out << detect.err);
    CHECK(detect.exit_code == 0);
    CHECK(contains(detect.out, "precision " + precision + ", layout nhwc"));
    CHECK(fs::exists(dir.path / "bus.jpg"));
  }
}

TEST_CASE("lab -v prints one line per compile: module, cache miss then hit, time and command", "[cli]") {
  lab::test::ScratchDir dir("cli-verbose");
  const std::string cache = " --cache-dir " + quoted((dir.path / "c").string());
  const std::string source = lab::Registry::instance().get(kKernel).source_path();
  const LabResult quiet = run_lab("source " + kKernel + " --ptx --arch sm_90" + cache);
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  lab::test::ScratchDir fresh("cli-verbose-fresh");
  const std::string fresh_cache = " --cache-dir " + quoted((fresh.path / "c").string());
  const LabResult miss = run_lab("source " + kKernel + " --ptx --arch sm_90 -v" + fresh_cache);
  REQUIRE(miss.exit_code == 0);
  CHECK(line_count(miss.err) == 1);
  CHECK(contains(miss.err, "lab: compile cuda sm_90 " + source + " ("));
  CHECK(contains(miss.err, "): cache miss, "));
  CHECK(contains(miss.err, " ms: nvrtc --"));
  CHECK(contains(miss.err, "--gpu-architecture=sm_90"));
  const LabResult hit = run_lab("source " + kKernel + " --ptx --arch sm_90 --verbose" + fresh_cache);
  CHECK(contains(hit.err, "): cache hit, "));
  const LabResult cpu = run_lab("run " + kKernel + " --backend cpu --param B=1 -v" + cache);
  REQUIRE(cpu.exit_code == 0);
  CHECK(contains(cpu.err, "lab: compile cpu "));
  CHECK(contains(cpu.err, "lab_emu_wrapper.cpp"));
}

TEST_CASE("a mistyped verb, kernel, variant or parameter gets a did-you-mean", "[cli]") {
  const LabResult verb = run_lab("detetc");
  CHECK(verb.exit_code == 2);
  CHECK(verb.err == "lab: unknown command 'detetc' (did you mean 'detect'?)\n");
  const LabResult after_option = run_lab("--arch sm_90 lsit");
  CHECK(after_option.exit_code == 2);
  CHECK(after_option.err == "lab: unknown command 'lsit' (did you mean 'list'?)\n");
  const LabResult far = run_lab("frobnicate");
  CHECK(far.exit_code == 2);
  CHECK(contains(far.err, "lab: unknown command 'frobnicate' (valid: "));
  CHECK(contains(far.err, "detect"));

  const LabResult kernel = run_lab("run detect_decod --backend cpu");
  CHECK(kernel.exit_code == 2);
  CHECK(kernel.err == "lab: unknown kernel 'detect_decod' (did you mean 'detect_decode'?)\n");
  const lab::Runner& runner = lab::Registry::instance().get(kKernel);
  std::string variant = runner.variants().front().name;
  std::swap(variant[1], variant[2]);
  const LabResult v = run_lab("source " + kKernel + " --variant " + variant);
  CHECK(v.exit_code == 2);
  CHECK(contains(v.err, "(did you mean '" + runner.variants().front().name + "'?)"));
  const LabResult param = run_lab("run " + kKernel + " --backend cpu --param BLOKC=64");
  CHECK(param.exit_code == 2);
  CHECK(param.err == "lab: unknown parameter 'BLOKC' for " + kKernel + " (did you mean 'BLOCK'?)\n");
}

TEST_CASE("lab --version names the version, commit, NVRTC and the compile target", "[cli]") {
  const LabResult r = run_lab("--version");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("lab 0.1.0 (commit ", 0) == 0);
  CHECK(contains(r.out, "\nNVRTC 1"));
  CHECK(contains(r.out, "\ntarget arch sm_"));
  CHECK(line_count(r.out) == 3);
}

TEST_CASE("numeric options state their valid range in words", "[cli]") {
  const std::pair<std::string, std::string> cases[] = {
      {"bench " + kKernel + " --iters 0", "lab: --iters: must be at least 1 (got 0)\n"},
      {"bench " + kKernel + " --warmup -1", "lab: --warmup: must be at least 0 (got -1)\n"},
      {"bench " + kKernel + " --iters many", "lab: --iters: must be a whole number (got 'many')\n"},
      {"bench pipeline --batch 0", "lab: --batch: must be between 1 and 1024 (got 0)\n"},
      {"bench pipeline --imgsz 100000", "lab: --imgsz: must be between 32 and 4096 (got 100000)\n"},
      {"detect --imgsz 2147483647", "lab: --imgsz: must be between 32 and 4096 (got 2147483647)\n"},
      {"detect --imgsz 99999999999999999999", "lab: --imgsz: must be between 32 and 4096 (got 99999999999999999999)\n"},
      {"detect --batch 5000", "lab: --batch: must be between 1 and 1024 (got 5000)\n"},
      {"detect --max-det 0", "lab: --max-det: must be at least 1 (got 0)\n"},
      {"detect --classes 0,-3", "lab: --classes: must be at least 0 (got -3)\n"},
      {"detect --conf 5", "lab: --conf: must be between 0 and 1 (got 5)\n"},
      {"run " + kKernel + " --seed -1", "lab: --seed: must be at least 0 (got -1)\n"},
      {"bench " + kKernel + " --seed 99999999999999999999",
       "lab: --seed: must be between 0 and 9223372036854775807 (got 99999999999999999999)\n"},
      {"loss --epochs 0", "lab: --epochs: must be at least 1 (got 0)\n"},
      {"loss --epoch -2", "lab: --epoch: must be at least 0 (got -2)\n"},
      {"loss --imgsz 0", "lab: --imgsz: must be between 32 and 4096 (got 0)\n"},
  };
  for (const auto& [args, message] : cases) {
    INFO("lab " << args);
    const LabResult r = run_lab(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == message);
  }
}

TEST_CASE("lab list KERNEL shows one kernel, and suggests a name for a typo", "[cli]") {
  const lab::Runner& runner = lab::Registry::instance().get(kKernel);
  const LabResult one = run_lab("list " + kKernel);
  REQUIRE(one.exit_code == 0);
  CHECK(one.out.rfind(runner.name() + "  [" + runner.family() + "]", 0) == 0);
  for (const lab::ParamSpec& p : runner.params()) CHECK(contains(one.out, p.name));
  for (const lab::Runner* other : lab::Registry::instance().all())
    if (other != &runner) CHECK_FALSE(contains(one.out, other->source_path()));
  const LabResult json = run_lab("list " + kKernel + " --json");
  REQUIRE(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.out)["name"] == kKernel);
  const LabResult typo = run_lab("list detect_decdoe");
  CHECK(typo.exit_code == 2);
  CHECK(typo.err == "lab: unknown kernel 'detect_decdoe' (did you mean 'detect_decode'?)\n");
}

TEST_CASE("every verb's --help ends with examples", "[cli]") {
  for (const std::string verb : {"list", "source", "run", "bench", "cache", "scenario", "scenario run", "demo",
                                 "loss", "grad", "convert", "detect", "data", "data synth", "val", "train"}) {
    INFO("lab " << verb << " --help");
    const LabResult r = run_lab(verb + " --help");
    CHECK(r.exit_code == 0);
    const size_t examples = r.out.rfind("Examples:\n  lab " + verb.substr(0, verb.find(' ')));
    REQUIRE(examples != std::string::npos);
    size_t lines = 0;
    for (size_t at = r.out.find("\n  lab ", examples); at != std::string::npos; at = r.out.find("\n  lab ", at + 1))
      ++lines;
    CHECK(lines >= 2);
    CHECK(lines <= 3);
  }
}

TEST_CASE("lab bench pipeline prints its header and a progress line before the first forward", "[cli]") {
  const fs::path model = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
  if (!fs::exists(model)) {
    WARN("skipped: " << model.string() << " is absent");
    return;
  }
  // Both streams into one (the exit status is then the pipe's), to see the order of the lines.
  const LabResult merged =
      run_lab("bench pipeline --backend cpu --imgsz 60 --iters 1 --warmup 0 --model " + quoted(model.string()) +
              " 2>&1 | cat");
  INFO(merged.out);
  const size_t warning = merged.out.find("lab: warning: --imgsz 60 is not a multiple of 32, using 64\n");
  const size_t header = merged.out.find("bench pipeline: ");
  const size_t progress = merged.out.find("lab: first forward (compile, plan), then 1 replays and 1 timed");
  const size_t arena = merged.out.find("activation arena: ");
  REQUIRE(warning != std::string::npos);
  REQUIRE(header != std::string::npos);
  REQUIRE(progress != std::string::npos);
  REQUIRE(arena != std::string::npos);
  CHECK(warning < header);
  CHECK(header < progress);
  CHECK(progress < arena);
  CHECK(contains(merged.out, "batch 1, 64x64"));
}
