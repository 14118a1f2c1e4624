// `lab detect --encode nvjpeg`: the flag's one-line errors (another backend, --nosave, a missing or wrong
// nvJPEG library; no output folder made), its help (and no --decode: the GPU decode was removed), the
// run-time loading of the installed library (lab does not link it), and on the GPU: the encoded JPEGs against
// the host encoder's (PSNR, 4:2:0, same detections) and a PNG output left to the host encoder.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/nvjpeg_library.hpp"
#include "tests/detect_json.hpp"
#include "tests/error_message.hpp"
#include "tests/scoped_env.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kAssets = LAB_ASSETS_DIR;

using lab::test::contains;
using lab::test::LabResult;
using lab::test::quoted;
using lab::test::read_text;

const std::string kNotAvailableAdvice =
    "set LAB_NVJPEG_LIBRARY=/path/libnvjpeg.so.13 or install it (scripts/install-deps.sh: the nvidia-nvjpeg "
    "wheel)";

// PSNR in dB of `b` against `a` over every channel of every pixel (the sizes must agree).
double psnr(const lab::Image& a, const lab::Image& b) {
  double squares = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) {
    const double d = double(a.rgb[i]) - double(b.rgb[i]);
    squares += d * d;
  }
  const double mse = squares / double(a.rgb.size());
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

// The (H << 4 | V) sampling byte of each component in a baseline JPEG's SOF0 segment.
std::vector<int> sof0_sampling(const std::string& jpeg) {
  for (size_t i = 2; i + 4 < jpeg.size();) {
    if (uint8_t(jpeg[i]) != 0xFF) return {};
    const int marker = uint8_t(jpeg[i + 1]);
    const size_t length = size_t(uint8_t(jpeg[i + 2])) << 8 | uint8_t(jpeg[i + 3]);
    if (marker == 0xC0) {
      std::vector<int> sampling;
      const int components = uint8_t(jpeg[i + 9]);
      for (int c = 0; c < components; ++c) sampling.push_back(uint8_t(jpeg[i + 10 + 3 * size_t(c) + 1]));
      return sampling;
    }
    i += 2 + length;
  }
  return {};
}

}  // namespace

TEST_CASE(
    "lab detect --encode nvjpeg: one-line errors for another backend, --nosave and a missing library, "
    "no output folder",
    "[detect]") {
  lab::test::ScratchDir dir("detect-nvjpeg-errors");
  lab::write_image(lab::Image(64, 48, 90), dir.path / "small.png");
  const std::string common =
      quoted((dir.path / "small.png").string()) + " --out " + quoted((dir.path / "runs").string());

  const LabResult cpu =
      lab::test::run_lab("detect " + common + " --backend cpu --precision fp16 --encode nvjpeg");
  CHECK(cpu.exit_code == 2);
  CHECK(cpu.err == "lab: --encode nvjpeg: needs --backend cuda (this run's backend is cpu)\n");

  const LabResult nosave =
      lab::test::run_lab("detect " + common + " --backend cuda --encode nvjpeg --nosave");
  CHECK(nosave.exit_code == 2);
  CHECK(nosave.err == "lab: --encode nvjpeg: nothing to encode with --nosave\n");

  {
    lab::test::ScopedEnv missing("LAB_NVJPEG_LIBRARY", "/nonexistent");
    const LabResult absent = lab::test::run_lab("detect " + common + " --backend cuda --encode nvjpeg");
    CHECK(absent.exit_code == 2);
    CHECK(absent.err ==
          "lab: --encode nvjpeg: nvJPEG is not available (/nonexistent: cannot open shared object file: No "
          "such "
          "file or directory); " +
              kNotAvailableAdvice + "\n");
  }

  const LabResult bad = lab::test::run_lab("detect " + common + " --encode gpu");
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--encode"));
  CHECK_FALSE(fs::exists(dir.path / "runs"));
}

TEST_CASE("lab detect --help describes --encode host|nvjpeg, --decode is no option", "[detect]") {
  const LabResult help = lab::test::run_lab("detect --help");
  REQUIRE(help.exit_code == 0);
  CHECK(contains(help.out, "--encode"));
  CHECK(contains(help.out, "nvjpeg (nvJPEG on the cuda backend's first GPU"));
  CHECK_FALSE(contains(help.out, "--decode"));
  const LabResult decode = lab::test::run_lab("detect --decode nvjpeg");
  CHECK(decode.exit_code == 2);
  CHECK(contains(decode.err, "--decode"));
}

TEST_CASE("nvJPEG: a library without the functions is refused, naming the missing one", "[detect]") {
  lab::test::ScopedEnv not_nvjpeg("LAB_NVJPEG_LIBRARY", "libm.so.6");
  CHECK(lab::test::error_message<lab::UsageError>([] { lab::load_nvjpeg("--encode nvjpeg"); }) ==
        "--encode nvjpeg: nvJPEG is not available (libm.so.6 has no nvjpegCreateEx); " + kNotAvailableAdvice);
}

TEST_CASE("nvJPEG: the installed library loads with every function the codec uses, lab does not link it",
          "[detect]") {
  lab::test::ScopedEnv chosen("LAB_NVJPEG_LIBRARY", nullptr);  // the build's path, else the loader's search
  const lab::NvjpegLibrary& nvjpeg = lab::load_nvjpeg("--encode nvjpeg");
  CHECK(contains(nvjpeg.path, "libnvjpeg.so.13"));
  const LabResult linked = lab::test::run_command("ldd " + quoted(LAB_BINARY));
  REQUIRE(linked.exit_code == 0);
  CHECK(contains(linked.out, "libc.so"));
  CHECK_FALSE(contains(linked.out, "nvjpeg"));
}

// The bar: a quality-95 JPEG of a photo typically sits in the low-to-mid 40s dB from its source; the GPU and
// host encodings of the same annotated image each add their own quantisation error (about 3 dB worse than
// either alone). 38 dB leaves room for nvJPEG's own colour conversion and chroma filter, while a much lower
// quality, a wrong pitch or swapped channels fall well below it.
TEST_CASE(
    "on the GPU nvjpeg: --encode nvjpeg writes 4:2:0 JPEGs within 38 dB PSNR of the host encoder's, "
    "same detections",
    "[detect][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-nvjpeg-encode");
  const std::string images = quoted((kAssets / "images" / "bus.jpg").string()) + " " +
                             quoted((kAssets / "images" / "zidane.jpg").string());
  const auto run = [&](const std::string& name, const std::string& flags) {
    const LabResult r = lab::test::run_lab("detect " + images + " --backend cuda --precision fp16 -v --out " +
                                           quoted((dir.path / name).string()) + " --json " +
                                           quoted((dir.path / (name + ".json")).string()) + flags);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  run("host", "");
  const LabResult gpu = run("gpu", " --encode nvjpeg");
  CHECK(contains(gpu.out, "gpu encode "));
  const nlohmann::json host_json = nlohmann::json::parse(read_text(dir.path / "host.json"));
  const nlohmann::json gpu_json = nlohmann::json::parse(read_text(dir.path / "gpu.json"));
  // decode stays libjpeg-turbo: the same detections (the timings differ run to run)
  CHECK(lab::test::without_times(host_json["images"]) == lab::test::without_times(gpu_json["images"]));
  for (const char* name : {"bus.jpg", "zidane.jpg"}) {
    INFO(name);
    const lab::Image host = lab::decode_image(dir.path / "host" / name);
    const lab::Image gpu_image = lab::decode_image(dir.path / "gpu" / name);
    REQUIRE(gpu_image.width == host.width);
    REQUIRE(gpu_image.height == host.height);
    CHECK(psnr(host, gpu_image) >= 38.0);
    CHECK(sof0_sampling(read_text(dir.path / "gpu" / name)) == std::vector<int>{0x22, 0x11, 0x11});
  }
}

TEST_CASE("on the GPU nvjpeg: --encode nvjpeg over a folder with a PNG among JPEGs, the PNG on the host",
          "[detect][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (!fs::exists(kAssets / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  lab::test::ScratchDir dir("detect-nvjpeg-encode-folder");
  const fs::path folder = dir.path / "images";
  fs::create_directories(folder);
  fs::copy_file(kAssets / "images" / "bus.jpg", folder / "bus.jpg");
  fs::copy_file(kAssets / "images" / "zidane.jpg", folder / "zidane.jpg");
  lab::write_image(lab::decode_image(kAssets / "images" / "bus.jpg"), folder / "bus_copy.png");
  const LabResult r = lab::test::run_lab(
      "detect " + quoted(folder.string()) +
      " --backend cuda --precision fp16 --batch 2 -v --encode nvjpeg --out " +
      quoted((dir.path / "runs").string()) + " --json " + quoted((dir.path / "out.json").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(contains(r.err, "skipped"));
  CHECK(contains(r.out, "gpu encode "));
  const nlohmann::json out = nlohmann::json::parse(read_text(dir.path / "out.json"));
  CHECK(out["images"].size() == 3);
  for (const char* name : {"bus.jpg", "zidane.jpg", "bus_copy.png"})
    CHECK(fs::exists(dir.path / "runs" / name));
  CHECK(read_text(dir.path / "runs" / "bus_copy.png").starts_with("\x89PNG"));
}
