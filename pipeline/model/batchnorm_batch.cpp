// The batch-statistics BatchNorm choice on the model's convs and its parameter gradients.
#include "pipeline/model/batchnorm_batch.hpp"

#include "pipeline/model/model_convs.hpp"

namespace lab {

BatchNormMode batchnorm_mode(const std::string& name) {
  return name == "batch" ? BatchNormMode::Batch : BatchNormMode::Frozen;
}

void set_batchnorm_mode(Yolo26Model& model, BatchNormMode mode) {
  for_each_conv(model, [&](ConvSpec& conv) { conv.batch_statistics = conv.bn && mode == BatchNormMode::Batch; });
}

void update_running_statistics(ConvSpec& conv, const BatchStatistics& batch, double count, double momentum) {
  FrozenBatchNorm& bn = *conv.bn;
  std::vector<double> mean(bn.mean.begin(), bn.mean.end()), var(bn.var.begin(), bn.var.end());
  running_statistics_update_reference(mean, var, batch, count, momentum);
  bn.mean.assign(mean.begin(), mean.end());
  bn.var.assign(var.begin(), var.end());
  fold_batchnorm(conv);
}

ConvSpec unnormalised_conv(const ConvSpec& conv) {
  ConvSpec u = conv;
  u.weight = conv.conv_weight;
  u.bias.assign(size_t(conv.c_out), 0.0f);
  u.silu = false;
  u.bn.reset();
  u.batch_statistics = false;
  return u;
}

std::vector<ParameterGradient> batch_statistics_parameter_gradients(const ConvSpec& conv,
                                                                    const std::vector<double>& d_conv_weight,
                                                                    const std::vector<double>& d_gamma,
                                                                    const std::vector<double>& d_beta) {
  const std::vector<int64_t> channel_shape = {conv.c_out};
  return {{conv.name + ".conv.weight", {conv.c_out, conv.c_in / conv.groups, conv.kernel, conv.kernel},
           d_conv_weight},
          {conv.name + ".bn.weight", channel_shape, d_gamma},
          {conv.name + ".bn.bias", channel_shape, d_beta}};
}

}  // namespace lab
