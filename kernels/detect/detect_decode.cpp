// detect_decode: spec, op, float64 reference, runner (random LTRB distances over a real anchor grid).
#include "kernels/detect/detect_decode.hpp"

#include "kernels/detect/detect_decode_params.cuh"
#include "kernels/runner.hpp"

namespace lab {

const KernelSpec& detect_decode_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "detect_decode",
      .family = "detect",
      .description = "raw LTRB [B,4,A] + anchor grid -> decoded cx,cy,w,h [B,4,A] (fused)",
      .source = "detect/detect_decode.cu",
      .variants = {{"v1_fused", "one thread per anchor, coalesced loads/stores"}},
      .params = {{"B", K::Int, "1", "batch size", 1, 1024},
                 {"IMG_H", K::Int, "640", "input height in pixels (multiple of 32)", 32, 8192, false, {}, 32},
                 {"IMG_W", K::Int, "640", "input width in pixels (multiple of 32)", 32, 8192, false, {}, 32},
                 {"BLOCK", K::Int, "256", "threads per block", 32, 1024, true}},
      .entries = {"detect_decode_v1_fused"}};
  return spec;
}

DetectDecodeOp::DetectDecodeOp(Backend& backend, const AnchorGrid& grid, int block_threads)
    : kernel_(backend, detect_decode_spec(), "v1_fused", "detect_decode_v1_fused"),
      anchor_x_(backend.upload_vector(grid.x)),
      anchor_y_(backend.upload_vector(grid.y)),
      strides_(backend.upload_vector(grid.stride)),
      anchors_(int(grid.size())),
      block_threads_(block_threads) {}

void DetectDecodeOp::decode(const float* raw, int batch, float* out) const {
  const unsigned blocks = unsigned((anchors_ + block_threads_ - 1) / block_threads_);
  kernel_.launch({{blocks, unsigned(batch), 1}, {unsigned(block_threads_), 1, 1}},
                 DetectDecodeParams{raw, anchor_x_.as<const float>(), anchor_y_.as<const float>(),
                                    strides_.as<const float>(), out, anchors_});
}

std::vector<double> detect_decode_reference(const std::vector<float>& raw, const AnchorGrid& grid,
                                            int batch) {
  const size_t A = grid.size();
  std::vector<double> out(raw.size());
  for (size_t b = 0; b < size_t(batch); ++b)
    for (size_t a = 0; a < A; ++a) {
      const double s = grid.stride[a];
      const auto d = [&](size_t row) { return double(raw[(b * 4 + row) * A + a]); };
      const double x1 = (grid.x[a] - d(0)) * s, y1 = (grid.y[a] - d(1)) * s;
      const double x2 = (grid.x[a] + d(2)) * s, y2 = (grid.y[a] + d(3)) * s;
      const double box[4] = {(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1};
      for (size_t row = 0; row < 4; ++row) out[(b * 4 + row) * A + a] = box[row];
    }
  return out;
}

namespace {

class DetectDecodeInstance : public InstanceBase {
 public:
  DetectDecodeInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        batch_(int(param_int(p, "B"))),
        grid_(make_anchor_grid(int(param_int(p, "IMG_H")), int(param_int(p, "IMG_W")))),
        op_(backend, grid_, int(param_int(p, "BLOCK"))),
        // Distances in grid units: positive, up to a few cells, as a trained head produces.
        raw_host_(random_uniform(size_t(batch_) * 4 * grid_.size(), 0.05f, 6.0f, derive_seed(seed, "raw"))),
        raw_(backend.upload_vector(raw_host_)),
        out_(output_array<float>(raw_host_.size())) {}
  void launch() override { op_.decode(raw_.as<const float>(), batch_, out_.as<float>()); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // float32 rounding of (a + (r-l)/2) * s with coordinates up to ~4096 px: ~2.4e-4 absolute per ulp.
    return {make_check("boxes", {size_t(batch_), 4, grid_.size()}, fetch<float>(out_, raw_host_.size()),
                       detect_decode_reference(raw_host_, grid_, batch_),
                       tol.value_or(Tolerance{1e-6, 2e-3}))};
  }
  WorkCounts work() const override {
    const double a = double(grid_.size());
    return {double(batch_) * a * 8 * 4 + a * 3 * 4, double(batch_) * a * 10};
  }

 private:
  int batch_;
  AnchorGrid grid_;
  DetectDecodeOp op_;
  std::vector<float> raw_host_;
  DeviceBuffer raw_, out_;
};

const bool registered = register_runner(detect_decode_spec(), make_instance<DetectDecodeInstance>());

}  // namespace
}  // namespace lab
