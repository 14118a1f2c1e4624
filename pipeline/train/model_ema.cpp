// ModelEma (model_ema.hpp): the two models' convs walked side by side in state-dict order.
#include "pipeline/train/model_ema.hpp"

#include <cmath>
#include <vector>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/train/state_tensors.hpp"

namespace lab::train {

ModelEma::ModelEma(Yolo26Model model, long long updates) : ema_(std::move(model)), updates_(updates) {}

double ModelEma::decay(long long updates) {
  return 0.9999 * (1.0 - std::exp(-double(updates) / 2000.0));
}

void ModelEma::update(const Yolo26Model& model) {
  std::vector<const ConvSpec*> sources;
  for_each_conv(model, [&](const ConvSpec& conv) { sources.push_back(&conv); });
  const double d = decay(++updates_);
  size_t index = 0;
  for_each_conv(ema_, [&](ConvSpec& conv) {
    if (index >= sources.size()) throw RuntimeError("EMA: the model has fewer convs than its average");
    const auto average = state_tensors(conv);
    const auto current = state_tensors(*sources[index++]);
    for (size_t t = 0; t < average.size(); ++t) {
      std::vector<float>& a = *average[t].second;
      const std::vector<float>& m = *current[t].second;
      if (a.size() != m.size()) throw RuntimeError("EMA: " + conv.name + " differs in size from its average");
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(d * a[i] + (1.0 - d) * m[i]);
    }
    fold_batchnorm(conv);
  });
  if (index != sources.size()) throw RuntimeError("EMA: the model has more convs than its average");
}

}  // namespace lab::train
