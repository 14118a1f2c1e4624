// The specs of the weightless layers' backward kernels, NnBackwardKernels, and MaxPool2dBackwardOp,
// UpsampleNearest2xBackwardOp, AddPlanesOp: argument checks and one launch each.
#include "kernels/nn/plane_backward_ops.hpp"

#include <string>

#include "kernels/nn/nn_kernels.hpp"
#include "kernels/nn/plane_ops.hpp"  // (plane_view.hpp: nn_params.cuh, which plane_backward_params.cuh needs)
#include "kernels/nn/plane_backward_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

// A function, not a namespace-scope constant: the specs are built during other files' static initialisation.
ParamSpec accumulate_param() {
  return {"ACCUMULATE", ParamSpec::Kind::Bool, "false",
          "add to the gradient the output view holds (else overwrite it)"};
}

int accumulate_flag(GradientWrite write) {
  return write == GradientWrite::Accumulate ? 1 : 0;
}

constexpr const char* kPlaneSmemVariant = "v2_plane_smem";

std::string plane_smem_problem(int64_t cells) {
  if (cells <= kPoolPlaneSmemCells) return "";
  return std::string(kPlaneSmemVariant) + " needs H*W <= " + std::to_string(kPoolPlaneSmemCells) +
         " (the plane in shared memory; got " + std::to_string(cells) + ")";
}

}  // namespace

const KernelSpec& maxpool2d_backward_spec() {
  static const KernelSpec spec = [] {
    const KernelSpec& forward = maxpool2d_spec();
    KernelSpec s = plane_kernel_spec(
        "maxpool2d_backward",
        "max_pool2d (K odd, stride 1, pad K/2) input gradient: each window's gradient to its first arg-max "
        "in "
        "scan order (PyTorch's CUDA tie rule), deterministic gather",
        kMaxPool2dBackwardKernel,
        "one thread per input cell re-deriving the arg-max of the windows covering it", "height",
        {forward.params.back(),
         {"TIES", ParamSpec::Kind::Bool, "false", "input values from {-2, ..., 2} only: most windows tie"},
         accumulate_param()});
    s.validate = forward.validate;
    s.variants = {
        {"auto", "v2_plane_smem where the plane fits in shared memory, else v1_direct"},
        {"v1_direct", s.variants.front().description},
        {kPlaneSmemVariant,
         "one CTA per plane: the plane and every window's arg-max in shared memory, then the gather",
         [](const Params& p) { return plane_smem_problem(param_int(p, "H") * param_int(p, "W")); }}};
    s.entries.clear();
    s.compile = [](const std::string& variant, const Params& p) {
      check_variant_runs(maxpool2d_backward_spec(), variant, p);
      std::vector<std::string> names;
      if (variant != kPlaneSmemVariant) names.push_back(kMaxPool2dBackwardKernel);
      if (variant != "v1_direct") names.push_back(kMaxPool2dBackwardPlaneKernel);
      return CompileRequest{"nn/maxpool2d_backward.cu", {}, names};
    };
    return s;
  }();
  return spec;
}

const KernelSpec& upsample_nearest2x_backward_spec() {
  static const KernelSpec spec = plane_kernel_spec(
      "upsample_nearest2x_backward",
      "nearest x2 upsampling input gradient [B,C,2H,2W] -> [B,C,H,W]: each cell the sum of its 2x2 block",
      kUpsampleBackwardKernel, "one thread per input cell, fixed summation order", "input height",
      {accumulate_param()});
  return spec;
}

const KernelSpec& add_planes_spec() {
  static const KernelSpec spec = plane_kernel_spec(
      "add_planes",
      "gradient accumulation into a channel slice, dst (+)= src between [B,C,H,W] views (residuals, "
      "split / concat)",
      kAddPlanesKernel, "one thread per element", "height", {accumulate_param()});
  return spec;
}

std::optional<PoolBackwardVariant> parse_pool_backward_variant(const std::string& name) {
  if (name == "v1_direct") return PoolBackwardVariant::Direct;
  if (name == kPlaneSmemVariant) return PoolBackwardVariant::PlaneSmem;
  return std::nullopt;
}

CompileRequest nn_backward_module_request() {
  return {
      kNnBackwardModuleSource,
      {},
      {kMaxPool2dBackwardKernel, kMaxPool2dBackwardPlaneKernel, kUpsampleBackwardKernel, kAddPlanesKernel}};
}

NnBackwardKernels::NnBackwardKernels(Backend& backend)
    : backend_(backend), module_(backend.compile(nn_backward_module_request())) {}

MaxPool2dBackwardOp::MaxPool2dBackwardOp(NnBackwardKernels& kernels, int channels, int kernel,
                                         std::optional<PoolBackwardVariant> force)
    : kernels_(kernels),
      direct_(kernels.kernel(kMaxPool2dBackwardKernel)),
      plane_(kernels.kernel(kMaxPool2dBackwardPlaneKernel)),
      channels_(channels),
      kernel_size_(kernel),
      force_(force) {
  check_pool_size("maxpool2d_backward", channels, kernel);
}

void MaxPool2dBackwardOp::run(int batch, int h, int w, ConstPlaneView in, ConstPlaneView grad_out,
                              PlaneView grad_in, GradientWrite write) const {
  if (h < 1 || w < 1)
    throw UsageError("maxpool2d_backward: bad plane " + std::to_string(h) + "x" + std::to_string(w));
  check_plane_views("maxpool2d_backward", batch, channels_, int64_t(h) * w, in, grad_in);
  check_plane_views("maxpool2d_backward", batch, channels_, int64_t(h) * w, grad_out, grad_in);
  const int64_t cells = int64_t(h) * w;
  const PoolBackwardVariant variant = force_.value_or(
      cells <= kPoolPlaneSmemCells ? PoolBackwardVariant::PlaneSmem : PoolBackwardVariant::Direct);
  const MaxPool2dBackwardParams params{kernel_view(in), kernel_view(grad_out), kernel_view(grad_in), h, w,
                                       kernel_size_,    accumulate_flag(write)};
  if (variant == PoolBackwardVariant::Direct) {
    kernels_.backend().launch(direct_, plane_launch("maxpool2d_backward", cells, channels_, batch),
                              kernel_params(params));
    return;
  }
  if (const std::string problem = plane_smem_problem(cells); !problem.empty())
    throw UsageError("maxpool2d_backward: " + problem);
  LaunchConfig cfg = plane_launch("maxpool2d_backward", 1, channels_, batch);  // one CTA per plane
  cfg.dynamic_shared_bytes = size_t(cells) * (sizeof(float) + sizeof(int));
  kernels_.backend().launch(plane_, cfg, kernel_params(params));
}

UpsampleNearest2xBackwardOp::UpsampleNearest2xBackwardOp(NnBackwardKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kUpsampleBackwardKernel)) {}

void UpsampleNearest2xBackwardOp::run(int batch, int channels, int h_in, int w_in, ConstPlaneView grad_out,
                                      PlaneView grad_in, GradientWrite write) const {
  if (h_in < 1 || w_in < 1)
    throw UsageError("upsample_nearest2x_backward: bad plane " + std::to_string(h_in) + "x" +
                     std::to_string(w_in));
  // The checked plane is the output's (4 h_in w_in): the larger of the two.
  check_plane_views("upsample_nearest2x_backward", batch, channels, int64_t(4) * h_in * w_in, grad_out,
                    grad_in);
  kernels_.backend().launch(
      kernel_, plane_launch("upsample_nearest2x_backward", int64_t(h_in) * w_in, channels, batch),
      kernel_params(UpsampleNearest2xBackwardParams{kernel_view(grad_out), kernel_view(grad_in), h_in, w_in,
                                                    accumulate_flag(write)}));
}

AddPlanesOp::AddPlanesOp(NnBackwardKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kAddPlanesKernel)) {}

void AddPlanesOp::run(int batch, int channels, int64_t plane, ConstPlaneView src, PlaneView dst,
                      GradientWrite write) const {
  check_plane_views("add_planes", batch, channels, plane, src, dst);
  kernels_.backend().launch(
      kernel_, plane_launch("add_planes", plane, channels, batch),
      kernel_params(AddPlanesParams{kernel_view(src), kernel_view(dst), int(plane), accumulate_flag(write)}));
}

}  // namespace lab
