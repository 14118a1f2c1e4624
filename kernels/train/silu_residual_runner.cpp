// Runner silu_residual: seeded z in [-8, 8] and residual in [-1, 1] through SiluResidualOp, against the
// float64 z / (1 + e^-z) (+ residual).
#include <cmath>

#include "kernels/runner.hpp"
#include "kernels/train/silu_residual_op.hpp"

namespace lab {
namespace {

std::vector<double> silu_residual_reference(const std::vector<float>& z, const std::vector<float>& residual,
                                            bool silu) {
  std::vector<double> y(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    const double v = z[i];
    y[i] = (silu ? v / (1.0 + std::exp(-v)) : v) + (residual.empty() ? 0.0 : double(residual[i]));
  }
  return y;
}

class SiluResidualInstance : public InstanceBase {
 public:
  SiluResidualInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        count_(size_t(param_int(p, "N"))),
        silu_(param_int(p, "SILU") == 1),
        z_host_(random_uniform(count_, -8.0f, 8.0f, derive_seed(seed, "z"))),
        residual_host_(param_int(p, "RESIDUAL") == 1
                           ? random_uniform(count_, -1.0f, 1.0f, derive_seed(seed, "res"))
                           : std::vector<float>{}),
        z_(backend.upload_vector(z_host_)),
        residual_(residual_host_.empty() ? DeviceBuffer{} : backend.upload_vector(residual_host_)),
        y_(output_array<float>(count_)),
        op_(backend) {}
  void launch() override {
    op_.run((long long)count_, z_.as<const float>(), residual_.as<const float>(), y_.as<float>(), silu_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // float32 expf (within 2 ulp), one division and one addition: a few 2^-24 relative on values up to ~9;
    // 1e-6 relative L2 and 1e-5 absolute. A missing residual or activation is off by O(1).
    return {make_check("y", {count_}, fetch<float>(y_, count_),
                       silu_residual_reference(z_host_, residual_host_, silu_),
                       tol.value_or(Tolerance{1e-6, 1e-5}))};
  }
  WorkCounts work() const override {
    const double n = double(count_);
    return {n * 4 * (residual_host_.empty() ? 2 : 3), n * 4};
  }

 private:
  size_t count_;
  bool silu_;
  std::vector<float> z_host_, residual_host_;
  DeviceBuffer z_, residual_, y_;
  SiluResidualOp op_;
};

const bool registered = register_runner(silu_residual_spec(), make_instance<SiluResidualInstance>());

}  // namespace
}  // namespace lab
