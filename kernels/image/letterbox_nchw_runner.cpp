// letterbox_nchw's spec and runner: seeded RGB8 images centred in a letterbox of padding, checked against a
// float64 reference.
#include "kernels/compiled_kernel.hpp"
#include "kernels/image/letterbox_nchw_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

const KernelSpec& letterbox_nchw_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "letterbox_nchw",
      .family = "image",
      .description = "resized RGB8 [B,H,W,3] -> centred in a padded letterbox, float RGB / 255 [B,3,H',W']",
      .source = "image/letterbox_nchw.cu",
      .variants = {{"v1_pixel", "one thread per output pixel, coalesced stores to each plane"}},
      .params = {{"B", K::Int, "1", "batch size", 1, 64},
                 {"SRC_H", K::Int, "480", "height of the resized image", 1, 8192},
                 {"SRC_W", K::Int, "640", "width of the resized image", 1, 8192},
                 {"DST_H", K::Int, "640", "letterbox (network input) height", 1, 8192},
                 {"DST_W", K::Int, "640", "letterbox (network input) width", 1, 8192},
                 {"PAD", K::Int, "114", "padding value (Ultralytics: 114)", 0, 255},
                 {"BLOCK", K::Int, "256", "threads per block", 32, 1024, true}},
      .entries = {"letterbox_nchw_v1_pixel"},
      .validate = [](const Params& p) {
        for (const auto& [src, dst] : {std::pair{"SRC_H", "DST_H"}, std::pair{"SRC_W", "DST_W"}})
          if (param_int(p, src) > param_int(p, dst))
            throw UsageError(std::string("parameter ") + src + "=" + p.at(src) + " of letterbox_nchw is " +
                             "invalid: must be at most " + dst + "=" + p.at(dst) +
                             " (the image fits inside)");
      }};
  return spec;
}

// The geometry of a problem (pointers unset): the image centred as Ultralytics centres it, with
// round(pad / 2 - 0.1) = floor(pad / 2) pixels of padding before it.
LetterboxNchwParams letterbox_of(const Params& p) {
  LetterboxNchwParams g{};
  g.src_h = int(param_int(p, "SRC_H")), g.src_w = int(param_int(p, "SRC_W"));
  g.dst_h = int(param_int(p, "DST_H")), g.dst_w = int(param_int(p, "DST_W"));
  g.top = (g.dst_h - g.src_h) / 2, g.left = (g.dst_w - g.src_w) / 2;
  g.pad = int(param_int(p, "PAD"));
  return g;
}

// Float64 reference, written output first: each element of [B, 3, dst_h, dst_w] looks up its source byte.
std::vector<double> letterbox_nchw_reference(const std::vector<unsigned char>& image,
                                             const LetterboxNchwParams& g, int batch) {
  auto byte_at = [&](int b, int c, int y, int x) -> double {
    if (y < 0 || y >= g.src_h || x < 0 || x >= g.src_w) return g.pad;
    return image[((size_t(b) * size_t(g.src_h) + size_t(y)) * size_t(g.src_w) + size_t(x)) * 3 + size_t(c)];
  };
  std::vector<double> out;
  out.reserve(size_t(batch) * 3 * size_t(g.dst_h) * size_t(g.dst_w));
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < g.dst_h; ++y)
        for (int x = 0; x < g.dst_w; ++x) out.push_back(byte_at(b, c, y - g.top, x - g.left) / 255.0);
  return out;
}

class LetterboxNchwInstance : public InstanceBase {
 public:
  LetterboxNchwInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        batch_(int(param_int(p, "B"))),
        block_(int(param_int(p, "BLOCK"))),
        geometry_(letterbox_of(p)),
        image_host_(random_bytes(size_t(batch_) * size_t(geometry_.src_h) * size_t(geometry_.src_w) * 3,
                                 derive_seed(seed, "image"))),
        image_(backend.upload_vector(image_host_)),
        out_(output_array<float>(output_count())),
        kernel_(backend, letterbox_nchw_spec(), variant, "letterbox_nchw_v1_pixel", p) {}
  void launch() override {
    LetterboxNchwParams p = geometry_;
    p.image = image_.as<const unsigned char>(), p.out = out_.as<float>();
    const unsigned blocks =
        unsigned((size_t(p.dst_h) * size_t(p.dst_w) + size_t(block_) - 1) / size_t(block_));
    kernel_.launch({{blocks, unsigned(batch_), 1}, {unsigned(block_), 1, 1}}, p);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // float32 v / 255 is the exact quotient rounded once: at most 6e-8 off for values <= 1. 1e-6 stays far
    // below 1 / 255 = 3.9e-3, the least error of a wrong pixel, channel or padding value.
    return {make_check("input", {size_t(batch_), 3, size_t(geometry_.dst_h), size_t(geometry_.dst_w)},
                       fetch<float>(out_, output_count()),
                       letterbox_nchw_reference(image_host_, geometry_, batch_),
                       tol.value_or(Tolerance{1e-6, 1e-6}))};
  }
  WorkCounts work() const override {
    const double count = double(output_count());
    return {double(image_host_.size()) + count * 4, count};
  }

 private:
  size_t output_count() const {
    return size_t(batch_) * 3 * size_t(geometry_.dst_h) * size_t(geometry_.dst_w);
  }

  int batch_, block_;
  LetterboxNchwParams geometry_;
  std::vector<unsigned char> image_host_;
  DeviceBuffer image_, out_;
  CompiledKernel kernel_;
};

const bool registered = register_runner(letterbox_nchw_spec(), make_instance<LetterboxNchwInstance>());

}  // namespace
}  // namespace lab
