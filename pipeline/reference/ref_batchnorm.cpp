// batchnorm_batch_forward / _backward on RefTensor through the float64 reference formulas.
#include "pipeline/reference/ref_batchnorm.hpp"

#include "kernels/train/batchnorm_batch_op.hpp"
#include "kernels/train/batchnorm_batch_reference.hpp"

namespace lab::reference {
namespace {

BatchNormLayout layout_of(const ConvSpec& spec, const RefTensor& u) {
  require_batch_statistics(u.batch, (long long)u.plane(), spec.name.c_str());
  return {u.batch, u.channels, (long long)u.plane()};
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void accumulate(std::vector<double>& into, const std::vector<double>& add) {
  into.resize(add.size(), 0.0);
  for (size_t i = 0; i < add.size(); ++i) into[i] += add[i];
}

}  // namespace

RefTensor batchnorm_batch_forward(const ConvSpec& spec, const RefTensor& u) {
  const BatchNormLayout l = layout_of(spec, u);
  const std::vector<double> z =
      batchnorm_forward_reference(widened(u.values), l, widened(spec.bn->gamma), widened(spec.bn->beta),
                                  spec.bn->eps, false);
  RefTensor out(u.batch, u.channels, u.height, u.width);
  for (size_t i = 0; i < z.size(); ++i) out.values[i] = float(z[i]);
  return out;
}

RefGrad batchnorm_batch_backward(const ConvSpec& spec, const RefTensor& u, const RefGrad& dy,
                                 ConvGradients& grads) {
  const BatchNormLayout l = layout_of(spec, u);
  BatchNormGradientsReference g = batchnorm_backward_reference(
      widened(u.values), dy.values, l, widened(spec.bn->gamma), widened(spec.bn->beta), spec.bn->eps, spec.silu);
  ConvGradient& grad = grads[spec.name];
  grad.batch = {batch_statistics_reference(widened(u.values), l), l.count()};
  accumulate(grad.gamma, g.d_gamma);
  accumulate(grad.beta, g.d_beta);
  RefGrad du(u.batch, u.channels, u.height, u.width);
  du.values = std::move(g.dx);
  return du;
}

}  // namespace lab::reference
