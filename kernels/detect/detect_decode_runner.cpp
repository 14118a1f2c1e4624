// Runner for detect_decode: random LTRB distances over a real anchor grid, checked against the reference.
#include "kernels/detect/detect_decode_op.hpp"
#include "kernels/detect/detect_decode_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
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
                       detect_decode_reference(raw_host_, grid_, batch_), tol.value_or(Tolerance{1e-6, 2e-3}))};
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
