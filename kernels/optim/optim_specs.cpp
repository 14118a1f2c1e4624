// The specs of the optimizer family (`lab list`, family optim): clip_grad_norm, sgd_step, adamw_step,
// musgd_step, muon_orthogonalize. The list runners' problems are TENSORS float32 tensors of SIZE + 97*i
// elements (odd, never a multiple of a block), in the groups 0, 1, 2, 0, ... in turn.
#include <string>

#include "kernels/optim/muon_op.hpp"
#include "kernels/optim/musgd_op.hpp"
#include "kernels/optim/optim_op.hpp"

namespace lab {
namespace {

using K = ParamSpec::Kind;

std::vector<ParamSpec> list_params(const std::string& default_tensors, const std::string& default_size) {
  return {
      {"TENSORS", K::Int, default_tensors, "tensors in the list (groups 0, 1, 2 in turn)", 1, 4096},
      {"SIZE", K::Int, default_size, "elements of the first tensor; tensor i has SIZE + 97*i", 1, 1 << 24}};
}

std::vector<ParamSpec> step_params(std::vector<ParamSpec> params, std::vector<ParamSpec> own) {
  params.push_back(
      {"STEPS", K::Int, "3", "optimizer steps per launch of the runner (one gradient each)", 1, 20});
  params.push_back({"HALF",
                    K::Choice,
                    "none",
                    "also write a 16-bit copy of the updated weights",
                    0,
                    0,
                    false,
                    {"none", "f16", "bf16"}});
  params.insert(params.end(), own.begin(), own.end());
  return params;
}

}  // namespace

const KernelSpec& clip_grad_norm_spec() {
  static const KernelSpec spec{
      .name = "clip_grad_norm",
      .family = "optim",
      .description =
          "torch clip_grad_norm_ over a list of gradients: total L2 norm, scale min(1, max / (norm + 1e-6))",
      .source = "optim/clip_grad_norm.cu",
      .variants =
          {{"v1_fp64_partials",
            "per-block float64 sums of squares, reduced in a fixed order (deterministic), then scaled"}},
      .params =
          [] {
            std::vector<ParamSpec> p = list_params("12", "3001");
            p.push_back({"NORM", K::Float, "25",
                         "the gradients' total L2 norm (the seeded values are scaled to it)", 1e-3, 1e6});
            p.push_back({"MAX_NORM", K::Float, "10", "clip threshold (Ultralytics: 10)", 1e-3, 1e6});
            return p;
          }(),
      .entries = {"clip_grad_norm_partials", "clip_grad_norm_finish", "clip_grad_norm_apply"}};
  return spec;
}

const KernelSpec& sgd_step_spec() {
  static const KernelSpec spec{
      .name = "sgd_step",
      .family = "optim",
      .description =
          "torch SGD step, Nesterov momentum, decay on group 0, per-group lr, over a list of tensors",
      .source = "optim/optim_step.cu",
      .variants = {{"v1_nesterov", "one launch over the list, 8 strided elements per thread"}},
      .params =
          step_params(list_params("12", "3001"),
                      {{"LR", K::Float, "0.01", "learning rate of groups 0 and 1", 0, 10},
                       {"BIAS_LR", K::Float, "0.05", "learning rate of group 2 (biases; warm-up)", 0, 10},
                       {"MOMENTUM", K::Float, "0.937", "Nesterov momentum", 0, 0.999},
                       {"WD", K::Float, "0.0005", "weight decay of group 0", 0, 1}}),
      .entries = {"sgd_step_nesterov"}};
  return spec;
}

const KernelSpec& adamw_step_spec() {
  static const KernelSpec spec{
      .name = "adamw_step",
      .family = "optim",
      .description = "torch AdamW step, decoupled decay on group 0, per-group lr, over a list of tensors",
      .source = "optim/optim_step.cu",
      .variants = {{"v1", "one launch over the list, 8 strided elements per thread"}},
      .params =
          step_params(list_params("12", "3001"),
                      {{"LR", K::Float, "0.002", "learning rate of groups 0 and 1", 0, 10},
                       {"BIAS_LR", K::Float, "0.01", "learning rate of group 2 (biases; warm-up)", 0, 10},
                       {"BETA1", K::Float, "0.937", "beta1 (Ultralytics: its momentum)", 0, 0.999},
                       {"BETA2", K::Float, "0.999", "beta2", 0, 0.999999},
                       {"EPS", K::Float, "1e-8", "epsilon", 1e-12, 1},
                       {"WD", K::Float, "0.0005", "weight decay of group 0", 0, 1}}),
      .entries = {"adamw_step"}};
  return spec;
}

const KernelSpec& musgd_step_spec() {
  static const KernelSpec spec{
      .name = "musgd_step",
      .family = "optim",
      .description =
          "Ultralytics MuSGD step: Muon (Newton-Schulz) + SGD on group 0's matrices, SGD elsewhere",
      .source = "optim/musgd_step.cu",
      .variants = {{"v1", "two list launches around one Newton-Schulz chain per Muon tensor"}},
      .params =
          step_params(list_params("6", "301"),
                      {{"LR", K::Float, "0.01", "learning rate of groups 0 and 1", 0, 10},
                       {"BIAS_LR", K::Float, "0.05", "learning rate of group 2 (biases; warm-up)", 0, 10},
                       {"MOMENTUM", K::Float, "0.9", "momentum of both parts (auto: 0.9)", 0, 0.999},
                       {"WD", K::Float, "0.0005", "weight decay of group 0", 0, 1},
                       {"MUON", K::Float, "0.5", "factor of the Muon part", 0, 10},
                       {"SGD", K::Float, "0.5", "factor of the SGD part on the Muon tensors", 0, 10}}),
      .entries = {"musgd_muon_momentum", "musgd_apply"}};
  return spec;
}

const KernelSpec& muon_orthogonalize_spec() {
  static const KernelSpec spec{
      .name = "muon_orthogonalize",
      .family = "optim",
      .description =
          "Muon's Newton-Schulz (5 quintic steps) orthogonalisation of a [ROWS, COLS] update, float32",
      .source = "optim/muon_newton_schulz.cu",
      .variants = {{"v1_fp32", "float64 norm in one block, then 3 tiled 16x16 gemms per step"}},
      .params = {{"ROWS", K::Int, "64", "rows (a conv weight's output channels)", 1, 4096},
                 {"COLS", K::Int, "147", "columns (input channels x kernel height x width)", 1, 65536}},
      .entries = {"muon_normalize", "muon_gemm"}};
  return spec;
}

}  // namespace lab
