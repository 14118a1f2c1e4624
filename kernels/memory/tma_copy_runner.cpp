// tma_copy's spec and runner: a seeded NHWC float tensor copied tile by tile (tile_* variants, one per
// swizzle mode) or gathered into the im2col matrix of a 3x3 pad-1 convolution (im2col_3x3; im2col_3x3_s2 at
// stride 2, through the map's traversal strides) through the TMA + mbarrier pipeline of tma_copy.cu, checked
// for exact equality with a reference that indexes the tensor directly.
#include <algorithm>

#include "kernels/compiled_kernel.hpp"
#include "kernels/memory/tma_copy_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kBlockThreads = 96;  // a producer warp and two consumer warps
constexpr size_t kSlotBytes = 4096;
constexpr int kConsumers = 2;
constexpr int kBoxRows = 32;  // rows of a tile, pixels of an im2col column

// What a variant copies: its entry, the swizzle of the source map (both spellings) and the box width; the
// im2col gather's convolution stride.
struct TmaCopyVariant {
  const char* entry;
  TensorSwizzle swizzle;
  bool im2col;
  int stride = 1;
};

TmaCopyVariant variant_of(const std::string& variant) {
  if (variant == "tile_sw64") return {"tma_copy_tile<2>", TensorSwizzle::B64, false};
  if (variant == "tile_sw32") return {"tma_copy_tile<3>", TensorSwizzle::B32, false};
  if (variant == "tile_plain") return {"tma_copy_tile<0>", TensorSwizzle::None, false};
  if (variant == "im2col_3x3") return {"tma_copy_im2col<1>", TensorSwizzle::B128, true};
  if (variant == "im2col_3x3_s2") return {"tma_copy_im2col<1>", TensorSwizzle::B128, true, 2};
  return {"tma_copy_tile<1>", TensorSwizzle::B128, false};
}

// Floats per box row: the swizzle's row span, 128 bytes without swizzle.
int box_cols_of(TensorSwizzle swizzle) {
  return int(swizzle == TensorSwizzle::None ? 128 : swizzle_bytes(swizzle)) / 4;
}

const KernelSpec& tma_copy_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "tma_copy",
      .family = "memory",
      .description =
          "NHWC float tensor copied (or im2col-gathered for a 3x3 conv) by a TMA + mbarrier pipeline",
      .source = "memory/tma_copy.cu",
      .variants = {{"tile_sw128", "[N*H*W][C] tiles of 32 x 32, source swizzled 128B"},
                   {"tile_sw64", "tiles of 32 x 16, source swizzled 64B"},
                   {"tile_sw32", "tiles of 32 x 8, source swizzled 32B"},
                   {"tile_plain", "tiles of 32 x 32, no swizzle"},
                   {"im2col_3x3",
                    "im2col matrix [N*H*W][9][C] of a 3x3 pad-1 conv, 32 pixels x 32 channels per "
                    "load, swizzled 128B"},
                   {"im2col_3x3_s2",
                    "im2col matrix [N*Ho*Wo][9][C] of a 3x3 pad-1 stride-2 conv (traversal strides 2), as "
                    "im2col_3x3"}},
      .params = {{"N", K::Int, "2", "images", 1, 64},
                 {"H", K::Int, "20", "image height", 1, 1024},
                 {"W", K::Int, "20", "image width", 1, 1024},
                 {"C",
                  K::Int,
                  "64",
                  "channels (a multiple of 4: rows of 16-byte multiples)",
                  4,
                  1024,
                  false,
                  {},
                  4},
                 {"STAGES", K::Int, "3", "shared-memory ring depth", 2, 4}},
      .entries = {"tma_copy_tile<1>", "tma_copy_tile<2>", "tma_copy_tile<3>", "tma_copy_tile<0>",
                  "tma_copy_im2col<1>"}};
  return spec;
}

// y = x, element by element.
std::vector<double> copy_reference(const std::vector<float>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i];
  return y;
}

// Output rows (or columns) of a 3x3 pad-1 convolution of `stride` over `size` input rows.
int conv_out_size(int size, int stride) {
  return (size - 1) / stride + 1;
}

// y[p][tap][c] = x at output pixel p's input position (stride times it) moved by the tap's offset minus one,
// zero outside the image.
std::vector<double> im2col_reference(const std::vector<float>& x, int n_images, int h, int w, int c,
                                     int stride) {
  const int ho = conv_out_size(h, stride), wo = conv_out_size(w, stride);
  std::vector<double> y(size_t(n_images) * size_t(ho) * size_t(wo) * 9 * size_t(c));
  size_t at = 0;
  for (int n = 0; n < n_images; ++n)
    for (int py = 0; py < ho; ++py)
      for (int px = 0; px < wo; ++px)
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int sy = stride * py + ky - 1, sx = stride * px + kx - 1;
            const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
            for (int ch = 0; ch < c; ++ch, ++at)
              y[at] = inside ? x[((size_t(n) * h + sy) * w + sx) * c + ch] : 0.0;
          }
  return y;
}

class TmaCopyInstance : public InstanceBase {
 public:
  TmaCopyInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        variant_(variant_of(variant)),
        n_(int(param_int(p, "N"))),
        h_(int(param_int(p, "H"))),
        w_(int(param_int(p, "W"))),
        c_(int(param_int(p, "C"))),
        stages_(int(param_int(p, "STAGES"))),
        x_host_(random_uniform(pixels() * size_t(c_), -1.0f, 1.0f, derive_seed(seed, "x"))),
        x_(backend.upload_vector(x_host_)),
        y_(output_array<float>(output_count())),
        kernel_(backend, tma_copy_spec(), variant, variant_.entry, p),
        params_(params_and_maps()) {}

  void launch() override {
    const unsigned grid =
        unsigned(std::min(params_.tiles, 2 * std::max(1, backend_.device().multiprocessors)));
    kernel_.launch({{grid, 1, 1}, {kBlockThreads, 1, 1}, 1024 + size_t(stages_ + kConsumers) * kSlotBytes},
                   params_);
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // A copy: every element equal to its source bit for bit, edges included.
    const std::vector<double> ref = variant_.im2col
                                        ? im2col_reference(x_host_, n_, h_, w_, c_, variant_.stride)
                                        : copy_reference(x_host_);
    std::vector<size_t> shape = {pixels(), size_t(c_)};
    if (variant_.im2col) shape = {out_pixels(), 9, size_t(c_)};
    return {make_check("y", shape, fetch<float>(y_, output_count()), ref, tol.value_or(Tolerance{0, 0}))};
  }

  WorkCounts work() const override { return {double(x_host_.size() + output_count()) * 4, 0}; }

 private:
  size_t pixels() const { return size_t(n_) * size_t(h_) * size_t(w_); }
  // Pixels of the im2col matrix: the convolution's output pixels.
  size_t out_pixels() const {
    return size_t(n_) * size_t(conv_out_size(h_, variant_.stride)) *
           size_t(conv_out_size(w_, variant_.stride));
  }
  size_t output_count() const {
    return variant_.im2col ? out_pixels() * 9 * size_t(c_) : pixels() * size_t(c_);
  }

  // The launch's parameters: the tile geometry and both tensor maps on this backend.
  TmaCopyParams params_and_maps() const {
    TmaCopyParams p{};
    p.box_cols = box_cols_of(variant_.swizzle);
    p.box_rows = kBoxRows;
    p.stages = stages_;
    p.h = h_, p.w = w_;
    p.stride = variant_.stride;
    p.tiles_x = (c_ + p.box_cols - 1) / p.box_cols;
    const size_t copied_pixels = variant_.im2col ? out_pixels() : pixels();
    const int pixel_tiles = int((copied_pixels + kBoxRows - 1) / kBoxRows);
    p.tiles = p.tiles_x * pixel_tiles * (variant_.im2col ? 9 : 1);
    const uint64_t c = uint64_t(c_), nhw = pixels();
    TensorMapDesc src = dense_tensor_map(TensorElement::F32, x_, {c, nhw}, {uint32_t(p.box_cols), kBoxRows});
    TensorMapDesc dst = dense_tensor_map(TensorElement::F32, y_, {c, nhw}, {uint32_t(p.box_cols), kBoxRows});
    if (variant_.im2col) {
      src = dense_tensor_map(TensorElement::F32, x_, {c, uint64_t(w_), uint64_t(h_), uint64_t(n_)}, {});
      src.im2col = true;
      src.pixels.lower = {-1, -1, 0};
      src.pixels.upper = {-1, -1, 0};  // the first tap's last position; a stride steps inside [lower, upper]
      src.element_strides = {1, uint32_t(variant_.stride), uint32_t(variant_.stride), 1, 1};
      src.pixels.channels_per_pixel = uint32_t(p.box_cols);
      src.pixels.pixels_per_column = kBoxRows;
      dst = dense_tensor_map(TensorElement::F32, y_, {c, 9, uint64_t(out_pixels())},
                             {uint32_t(p.box_cols), 1, kBoxRows});
    }
    src.swizzle = variant_.swizzle;
    p.src = backend_.tensor_map(src);
    p.dst = backend_.tensor_map(dst);
    return p;
  }

  TmaCopyVariant variant_;
  int n_, h_, w_, c_, stages_;
  std::vector<float> x_host_;
  DeviceBuffer x_, y_;
  CompiledKernel kernel_;
  TmaCopyParams params_;
};

const bool registered = register_runner(tma_copy_spec(), make_instance<TmaCopyInstance>());

}  // namespace
}  // namespace lab
