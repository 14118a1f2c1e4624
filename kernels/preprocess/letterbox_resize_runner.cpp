// letterbox_resize's spec and runner: a seeded RGB8 image resized by bilinear tap tables (made here from the
// sample positions, any valid tables will do) and centred in a letterbox of padding, checked against a
// float64 bilinear blend of the same taps.
#include <algorithm>
#include <cmath>

#include "kernels/compiled_kernel.hpp"
#include "kernels/preprocess/letterbox_resize_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr int kWeightOne = 2048;  // the taps' fixed-point 1.0

const KernelSpec& letterbox_resize_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "letterbox_resize",
      .family = "preprocess",
      .description = "source RGB8 [H,W,3] -> bilinear resize (OpenCV fixed point) centred in a padded "
                     "letterbox, float RGB / 255 [3,H',W']",
      .source = "preprocess/letterbox_resize.cu",
      .variants = {{"v1_pixel", "one thread per output pixel, coalesced stores to each plane"}},
      .params = {{"SRC_H", K::Int, "1080", "height of the source image", 1, 8192},
                 {"SRC_W", K::Int, "810", "width of the source image", 1, 8192},
                 {"RESIZED_H", K::Int, "640", "height of the resized image", 1, 8192},
                 {"RESIZED_W", K::Int, "480", "width of the resized image", 1, 8192},
                 {"DST_H", K::Int, "640", "letterbox (network input) height", 1, 8192},
                 {"DST_W", K::Int, "480", "letterbox (network input) width", 1, 8192},
                 {"PAD", K::Int, "114", "padding value (Ultralytics: 114)", 0, 255},
                 {"BLOCK", K::Int, "256", "threads per block", 32, 1024, true}},
      .entries = {"letterbox_resize_v1_pixel"},
      .validate = [](const Params& p) {
        for (const auto& [resized, dst] : {std::pair{"RESIZED_H", "DST_H"}, std::pair{"RESIZED_W", "DST_W"}})
          if (param_int(p, resized) > param_int(p, dst))
            throw UsageError(std::string("parameter ") + resized + "=" + p.at(resized) +
                             " of letterbox_resize is invalid: must be at most " + dst + "=" + p.at(dst) +
                             " (the resized image fits inside)");
      }};
  return spec;
}

// Seeded source bytes over 0..255.
std::vector<unsigned char> source_bytes(size_t count, uint64_t seed) {
  std::vector<unsigned char> bytes;
  bytes.reserve(count);
  for (float v : random_uniform(count, 0.0f, 255.99f, seed)) bytes.push_back(static_cast<unsigned char>(v));
  return bytes;
}

// Taps sampling `source` pixels at the centres of `target` ones, (d + 0.5) * source / target - 0.5, clamped
// to the image, the second weight the rounded fraction.
std::vector<LetterboxTap> sample_taps(int source, int target) {
  std::vector<LetterboxTap> taps;
  for (int d = 0; d < target; ++d) {
    const double position = std::max(0.0, (d + 0.5) * source / target - 0.5);
    const int index = std::min(int(position), source - 1);
    const int weight1 = index == source - 1 ? 0 : int(std::lround((position - index) * kWeightOne));
    taps.push_back({index, std::min(index + 1, source - 1), kWeightOne - weight1, weight1});
  }
  return taps;
}

// Float64 reference, written output first: each element of [3, dst_h, dst_w] is the padding or the
// weighted sum of its four source bytes.
std::vector<double> letterbox_resize_reference(const std::vector<unsigned char>& image,
                                               const LetterboxResizeParams& g,
                                               const std::vector<LetterboxTap>& columns,
                                               const std::vector<LetterboxTap>& rows) {
  auto byte_at = [&](int y, int x, int c) {
    return double(image[(size_t(y) * size_t(g.src_w) + size_t(x)) * 3 + size_t(c)]);
  };
  auto blend = [&](int c, int y, int x) -> double {
    if (y < 0 || y >= g.resized_h || x < 0 || x >= g.resized_w) return g.pad;
    const LetterboxTap& r = rows[size_t(y)];
    const LetterboxTap& k = columns[size_t(x)];
    double sum = 0;
    for (const auto& [row, wy] : {std::pair{r.index0, r.weight0}, std::pair{r.index1, r.weight1}})
      sum += wy * (k.weight0 * byte_at(row, k.index0, c) + k.weight1 * byte_at(row, k.index1, c));
    return sum / (double(kWeightOne) * kWeightOne);
  };
  std::vector<double> out;
  out.reserve(3 * size_t(g.dst_h) * size_t(g.dst_w));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < g.dst_h; ++y)
      for (int x = 0; x < g.dst_w; ++x) out.push_back(blend(c, y - g.top, x - g.left) / 255.0);
  return out;
}

class LetterboxResizeInstance : public InstanceBase {
 public:
  LetterboxResizeInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        block_(int(param_int(p, "BLOCK"))),
        src_h_(int(param_int(p, "SRC_H"))),
        geometry_(geometry_of(p)),
        columns_host_(sample_taps(geometry_.src_w, geometry_.resized_w)),
        rows_host_(sample_taps(src_h_, geometry_.resized_h)),
        image_host_(source_bytes(size_t(src_h_) * size_t(geometry_.src_w) * 3, derive_seed(seed, "image"))),
        image_(backend.upload_vector(image_host_)),
        columns_(backend.upload_vector(columns_host_)),
        rows_(backend.upload_vector(rows_host_)),
        out_(output_array<float>(output_count())),
        kernel_(backend, letterbox_resize_spec(), variant, "letterbox_resize_v1_pixel", p) {}
  void launch() override {
    LetterboxResizeParams p = geometry_;
    p.image = image_.as<const unsigned char>(), p.out = out_.as<float>();
    p.columns = columns_.as<const LetterboxTap>(), p.rows = rows_.as<const LetterboxTap>();
    kernel_.launch({{unsigned((output_count() / 3 + size_t(block_) - 1) / size_t(block_)), 1, 1},
                    {unsigned(block_), 1, 1}},
                   p);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // The kernel's fixed-point shifts truncate the exact blend by less than one level before its rounding
    // (and by a few thousandths of a level more at the worst), so each value lies within 1.01 / 255 of the
    // float64 blend (rel_l2 then at most about 1 / 255 / 0.5); a wrong tap, row, channel or padding value
    // misses by many levels on random bytes.
    return {make_check("input", {3, size_t(geometry_.dst_h), size_t(geometry_.dst_w)},
                       fetch<float>(out_, output_count()),
                       letterbox_resize_reference(image_host_, geometry_, columns_host_, rows_host_),
                       tol.value_or(Tolerance{8e-3, 1.01 / 255}))};
  }
  WorkCounts work() const override {
    const double count = double(output_count());
    return {double(image_host_.size()) + count * 4, count};
  }

 private:
  // The geometry of a problem (pointers unset): the resized image centred with floor(pad / 2) before it.
  static LetterboxResizeParams geometry_of(const Params& p) {
    LetterboxResizeParams g{};
    g.src_w = int(param_int(p, "SRC_W"));
    g.resized_h = int(param_int(p, "RESIZED_H")), g.resized_w = int(param_int(p, "RESIZED_W"));
    g.dst_h = int(param_int(p, "DST_H")), g.dst_w = int(param_int(p, "DST_W"));
    g.top = (g.dst_h - g.resized_h) / 2, g.left = (g.dst_w - g.resized_w) / 2;
    g.pad = int(param_int(p, "PAD"));
    return g;
  }
  size_t output_count() const { return 3 * size_t(geometry_.dst_h) * size_t(geometry_.dst_w); }

  int block_, src_h_;
  LetterboxResizeParams geometry_;
  std::vector<LetterboxTap> columns_host_, rows_host_;
  std::vector<unsigned char> image_host_;
  DeviceBuffer image_, columns_, rows_, out_;
  CompiledKernel kernel_;
};

const bool registered = register_runner(letterbox_resize_spec(), make_instance<LetterboxResizeInstance>());

}  // namespace
}  // namespace lab
