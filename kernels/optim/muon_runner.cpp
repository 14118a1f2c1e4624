// Runner muon_orthogonalize: a seeded [ROWS, COLS] update through MuonOrthogonalizeOp against the float64
// Newton-Schulz reference (optim_reference.hpp), scaled as Ultralytics scales a 2-D gradient.
#include "kernels/optim/muon_op.hpp"
#include "kernels/optim/optim_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// Five quintic steps amplify the float32 rounding of the gemms (sums of up to max(ROWS, COLS) products):
// measured rel_l2 ~1.4e-6 and max_abs ~1.3e-6 against float64 from 7x5 to 96x288 (entries up to ~1.2). 2e-5
// leaves room for the 2304-long sums of a 3x3 conv of 256 channels; a wrong coefficient, transpose or scale
// moves entries by 1e-2 or more.
constexpr Tolerance kMuonTolerance{2e-5, 2e-5};

class MuonInstance : public InstanceBase {
 public:
  MuonInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        rows_(int(param_int(p, "ROWS"))),
        cols_(int(param_int(p, "COLS"))),
        g_(random_uniform(size_t(rows_) * size_t(cols_), -1.0f, 1.0f, derive_seed(seed, "update"))),
        g_device_(backend.upload_vector(g_)),
        out_(output_array<float>(g_.size())),
        op_(backend) {}
  void launch() override { op_.run(g_device_.as<const float>(), rows_, cols_, scale(), out_.as<float>()); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    return {
        make_check("update", {size_t(rows_), size_t(cols_)}, fetch<float>(out_, g_.size()),
                   newton_schulz5_reference(std::vector<double>(g_.begin(), g_.end()), rows_, cols_, scale()),
                   tol.value_or(kMuonTolerance))};
  }
  // Per step 2 r^2 c (X X^T) + 2 r^3 (A A) + 2 r^2 c (B X), r = min, c = max; the gemm re-reads its tiles.
  WorkCounts work() const override {
    const double r = std::min(rows_, cols_), c = std::max(rows_, cols_);
    return {double(g_.size()) * 8.0 * 6, 5 * (4 * r * r * c + 2 * r * r * r)};
  }

 private:
  double scale() const { return muon_update_scale({rows_, cols_}); }
  int rows_, cols_;
  std::vector<float> g_;
  DeviceBuffer g_device_, out_;
  MuonOrthogonalizeOp op_;
};

const bool registered = register_runner(muon_orthogonalize_spec(), make_instance<MuonInstance>());

}  // namespace
}  // namespace lab
