// The fold and its chain rule. With s = sqrt(var + eps) per output channel o:
//   w'[o,i] = w[o,i] * gamma[o] / s[o]          b'[o] = beta[o] - mean[o] * gamma[o] / s[o]
// so, with g' = d loss / d w' and d' = d loss / d b':
//   d w[o,i]   = g'[o,i] * gamma[o] / s[o]
//   d gamma[o] = (sum_i g'[o,i] * w[o,i] - d'[o] * mean[o]) / s[o]
//   d beta[o]  = d'[o]
// (checked by finite differences in tests/test_reference_backward.cpp).
#include "pipeline/model/batchnorm_fold.hpp"

#include <cmath>

namespace lab {

void fold_batchnorm(ConvSpec& conv) {
  if (!conv.bn) return;
  const FrozenBatchNorm& bn = *conv.bn;
  const size_t per_out = conv.conv_weight.size() / size_t(conv.c_out);
  conv.weight.resize(conv.conv_weight.size());
  conv.bias.resize(size_t(conv.c_out));
  for (size_t o = 0; o < size_t(conv.c_out); ++o) {
    const double factor = double(bn.gamma[o]) / std::sqrt(double(bn.var[o]) + bn.eps);
    for (size_t i = 0; i < per_out; ++i)
      conv.weight[o * per_out + i] = float(double(conv.conv_weight[o * per_out + i]) * factor);
    conv.bias[o] = float(double(bn.beta[o]) - double(bn.mean[o]) * factor);
  }
}

std::vector<ParameterRef> conv_parameters(ConvSpec& conv) {
  if (!conv.bn) return {{conv.name + ".weight", &conv.weight}, {conv.name + ".bias", &conv.bias}};
  return {{conv.name + ".conv.weight", &conv.conv_weight},
          {conv.name + ".bn.weight", &conv.bn->gamma},
          {conv.name + ".bn.bias", &conv.bn->beta}};
}

std::vector<ParameterGradient> conv_parameter_gradients(const ConvSpec& conv,
                                                        const std::vector<double>& d_weight,
                                                        const std::vector<double>& d_bias) {
  const std::vector<int64_t> weight_shape = {conv.c_out, conv.c_in / conv.groups, conv.kernel, conv.kernel};
  const std::vector<int64_t> channel_shape = {conv.c_out};
  if (!conv.bn)
    return {{conv.name + ".weight", weight_shape, d_weight}, {conv.name + ".bias", channel_shape, d_bias}};
  const FrozenBatchNorm& bn = *conv.bn;
  const size_t per_out = d_weight.size() / size_t(conv.c_out);
  ParameterGradient weight{conv.name + ".conv.weight", weight_shape, std::vector<double>(d_weight.size())};
  ParameterGradient gamma{conv.name + ".bn.weight", channel_shape, std::vector<double>(size_t(conv.c_out))};
  for (size_t o = 0; o < size_t(conv.c_out); ++o) {
    const double s = std::sqrt(double(bn.var[o]) + bn.eps);
    double through_weight = 0;
    for (size_t i = 0; i < per_out; ++i) {
      weight.values[o * per_out + i] = d_weight[o * per_out + i] * double(bn.gamma[o]) / s;
      through_weight += d_weight[o * per_out + i] * double(conv.conv_weight[o * per_out + i]);
    }
    gamma.values[o] = (through_weight - d_bias[o] * double(bn.mean[o])) / s;
  }
  return {std::move(weight), std::move(gamma), {conv.name + ".bn.bias", channel_shape, d_bias}};
}

}  // namespace lab
