// The frozen BatchNorm of training on the device (batchnorm_fold.cu): after each optimizer step the fold of
// every conv's checkpoint parameters into the weights and biases its ops read, after each backward the chain
// rule of the folded gradients onto the checkpoint gradients, and on request the per-conv gradient norms.
// One launch each over a table of every conv (batchnorm_fold_params.cuh).
#pragma once
#include <vector>

#include "kernels/compiled_kernel.hpp"
#include "kernels/train/batchnorm_fold_params.cuh"

namespace lab {

// Spec batchnorm_fold (family train): entries batchnorm_fold, batchnorm_fold_backward, conv_grad_norms;
// parameters CONVS, C_OUT, C_IN, K of the runner's seeded table.
const KernelSpec& batchnorm_fold_spec();

// The table on the device: entries numbered (first_channel) in order, then uploaded once.
class FoldConvTable {
 public:
  FoldConvTable(Backend& backend, std::vector<FoldConv> convs);
  const FoldConv* device_table() const { return table_.as<const FoldConv>(); }
  int size() const { return int(convs_.size()); }
  int total_channels() const { return total_channels_; }
  const std::vector<FoldConv>& convs() const { return convs_; }

 private:
  std::vector<FoldConv> convs_;
  int total_channels_ = 0;
  DeviceBuffer table_;
};

class BatchnormFoldOp {
 public:
  explicit BatchnormFoldOp(Backend& backend);
  // Every conv's folded weight (into each target) and bias.
  void fold(const FoldConvTable& table) const;
  // Every conv's checkpoint gradients += the chain rule of its folded gradients times `unscale` (1 / the fp16
  // loss scale they carry).
  void backward(const FoldConvTable& table, double unscale = 1.0) const;
  // norms[c] (device, [table.size()] doubles) = the L2 norm of conv c's checkpoint gradients.
  void grad_norms(const FoldConvTable& table, double* norms) const;

 private:
  CompiledKernel fold_, backward_, norms_;
};

}  // namespace lab
