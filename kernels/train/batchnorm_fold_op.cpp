// The batchnorm_fold spec, the conv table and the three launches.
#include "kernels/train/batchnorm_fold_op.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

std::vector<FoldConv> numbered(std::vector<FoldConv> convs) {
  if (convs.empty()) throw UsageError("batchnorm fold: the conv table is empty");
  int channels = 0;
  for (FoldConv& c : convs) {
    if (c.c_out < 1 || c.inputs < 0 || c.taps < 1)
      throw UsageError("batchnorm fold: a conv of the table has no output channels or taps");
    c.first_channel = channels;
    channels += c.c_out;
  }
  return convs;
}

LaunchConfig per_channel(const FoldConvTable& table) {
  return {{unsigned(table.total_channels()), 1, 1}, {unsigned(kFoldThreads), 1, 1}};
}

}  // namespace

const KernelSpec& batchnorm_fold_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "batchnorm_fold",
      .family = "train",
      .description =
          "frozen BatchNorm of training over a table of convs: fold into the ops' weight layouts, "
          "chain rule of the folded gradients, per-conv gradient norms",
      .source = "train/batchnorm_fold.cu",
      .variants = {{"v1_channel", "one block per output channel, float64 fold and fixed-order sums"}},
      .params = {{"CONVS", K::Int, "5", "convs in the table (every third one without BatchNorm)", 1, 512},
                 {"C_OUT", K::Int, "24", "output channels of the first conv; conv i has C_OUT + 7*i", 1,
                  4096},
                 {"C_IN", K::Int, "16", "input channels of every conv", 1, 4096},
                 {"K", K::Int, "3", "kernel size", 1, 7}},
      .entries = {"batchnorm_fold", "batchnorm_fold_backward", "conv_grad_norms"}};
  return spec;
}

FoldConvTable::FoldConvTable(Backend& backend, std::vector<FoldConv> convs)
    : convs_(numbered(std::move(convs))),
      total_channels_(convs_.back().first_channel + convs_.back().c_out),
      table_(backend.upload_vector(convs_)) {}

BatchnormFoldOp::BatchnormFoldOp(Backend& backend)
    : fold_(backend, batchnorm_fold_spec(), "v1_channel", "batchnorm_fold"),
      backward_(backend, batchnorm_fold_spec(), "v1_channel", "batchnorm_fold_backward"),
      norms_(backend, batchnorm_fold_spec(), "v1_channel", "conv_grad_norms") {}

void BatchnormFoldOp::fold(const FoldConvTable& table) const {
  fold_.launch(per_channel(table), BatchnormFoldParams{table.device_table(), table.size(), 1.0});
}

void BatchnormFoldOp::backward(const FoldConvTable& table, double unscale) const {
  backward_.launch(per_channel(table), BatchnormFoldParams{table.device_table(), table.size(), unscale});
}

void BatchnormFoldOp::grad_norms(const FoldConvTable& table, double* norms) const {
  norms_.launch({{unsigned(table.size()), 1, 1}, {unsigned(kFoldThreads), 1, 1}},
                ConvGradNormsParams{table.device_table(), table.size(), norms});
}

}  // namespace lab
