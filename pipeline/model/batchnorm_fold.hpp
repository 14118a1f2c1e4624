// Frozen BatchNorm between the checkpoint's parameters and the folded convolution the executors run:
// the fold itself (forward) and the chain rule that maps gradients of the folded weight/bias back onto
// conv.weight, bn.weight and bn.bias (backward). BatchNorm is in eval mode: its running statistics are
// constants, so they get no gradient.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/model/yolo26_model.hpp"

namespace lab {

// weight/bias from conv_weight and bn in float64: w' = w * gamma / sqrt(var + eps),
// b' = beta - mean * gamma / sqrt(var + eps). A conv without bn is left as it is.
void fold_batchnorm(ConvSpec& conv);

// The conv's checkpoint parameters in state-dict order, by name: conv.weight, bn.weight, bn.bias for an
// Ultralytics Conv (the folded weight/bias follow from them through fold_batchnorm), weight and bias for a
// plain Conv2d. The pointers are into `conv`.
struct ParameterRef {
  std::string name;
  std::vector<float>* values;
};
std::vector<ParameterRef> conv_parameters(ConvSpec& conv);

// d loss / d one checkpoint parameter, keyed by its state-dict name.
struct ParameterGradient {
  std::string name;  // "model.0.conv.weight", "model.0.bn.weight", "model.23.cv2.0.2.bias", ...
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// The gradients of the conv's checkpoint parameters from those of its folded weight [c_out, ...] and bias
// [c_out]: conv.weight, bn.weight, bn.bias for an Ultralytics Conv, weight and bias for a plain Conv2d.
std::vector<ParameterGradient> conv_parameter_gradients(const ConvSpec& conv,
                                                        const std::vector<double>& d_weight,
                                                        const std::vector<double>& d_bias);

}  // namespace lab
