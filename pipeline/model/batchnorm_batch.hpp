// Batch-statistics BatchNorm of the model's convs (BatchNorm2d in train mode, for training from scratch):
// the choice between it and frozen BatchNorm (batchnorm_fold.hpp, the default), the conv before its
// BatchNorm, and the checkpoint parameters' gradients when the batch normalises. The formulas are
// kernels/train/batchnorm_batch_reference.hpp's.
#pragma once
#include <string>
#include <vector>

#include "kernels/train/batchnorm_batch_reference.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

// Ultralytics' BatchNorm2d momentum (initialize_weights in ultralytics/utils/torch_utils.py; eps 1e-3 is
// FrozenBatchNorm's).
constexpr double kBatchNormMomentum = 0.03;

// "frozen" (the running statistics folded into each conv) or "batch" (the batch's statistics).
enum class BatchNormMode { Frozen, Batch };
// The mode named by an option value already checked against {"frozen", "batch"}.
BatchNormMode batchnorm_mode(const std::string& name);

// Marks every conv with a BatchNorm to normalise with batch statistics (Batch) or with its folded running
// statistics (Frozen).
void set_batchnorm_mode(Yolo26Model& model, BatchNormMode mode);

// running = (1 - momentum) running + momentum batch (the unbiased variance var * count / (count - 1) for
// running_var), rounded to float32 as the checkpoint keeps them; then the conv is refolded with them.
void update_running_statistics(ConvSpec& conv, const BatchStatistics& batch, double count, double momentum);

// The conv under a batch-statistics BatchNorm: conv.weight, no bias, no activation; its output u is what
// the BatchNorm normalises.
ConvSpec unnormalised_conv(const ConvSpec& conv);

// conv.weight, bn.weight, bn.bias of a batch-statistics conv from d loss / d conv.weight, d gamma, d beta
// (no chain rule: the forward uses them directly).
std::vector<ParameterGradient> batch_statistics_parameter_gradients(const ConvSpec& conv,
                                                                    const std::vector<double>& d_conv_weight,
                                                                    const std::vector<double>& d_gamma,
                                                                    const std::vector<double>& d_beta);

}  // namespace lab
