// NnKernels: one compile of nn_kernels.cu with every name expression; the shared launch shape.
#include "nn/nn_kernels.hpp"

#include <algorithm>

#include "errors.hpp"

namespace lab {

bool is_specialised_kernel_size(int k) {
  return std::find(std::begin(kSpecialisedKernelSizes), std::end(kSpecialisedKernelSizes), k) !=
         std::end(kSpecialisedKernelSizes);
}

std::string conv2d_tiled_kernel(int k, int channel_tile) {
  return "conv2d_tiled<" + std::to_string(k) + ", " + std::to_string(channel_tile) + ">";
}

std::string conv2d_tf32_kernel(int k, int channel_tile) {
  return "conv2d_tf32<" + std::to_string(k) + ", " + std::to_string(channel_tile) + ">";
}

std::string conv2d_depthwise_kernel(int k) {
  return "conv2d_depthwise<" + std::to_string(k) + ">";
}

std::string conv2d_mma_kernel(HalfType t, int k, int channel_tile) {
  return "conv2d_mma<" + half_type_template_arg(t) + ", " + std::to_string(k) + ", " +
         std::to_string(channel_tile) + ">";
}

namespace {

bool is_mma_kernel(const std::string& name_expression) {
  return name_expression.rfind("conv2d_mma<", 0) == 0;
}

}  // namespace

NnKernelNames all_nn_kernel_names() {
  NnKernelNames n{{kConv2dDirectKernel, kConv2dSplitkReduceKernel}, {}};
  for (int k : kSpecialisedKernelSizes) {
    for (int tile : kTiledChannelTiles) {
      n.nn.push_back(conv2d_tiled_kernel(k, tile));
      n.nn.push_back(conv2d_tf32_kernel(k, tile));
    }
    n.nn.push_back(conv2d_depthwise_kernel(k));
  }
  for (const char* k : {kMaxPool2dKernel, kUpsampleKernel, kCopyPlanesKernel}) n.nn.push_back(k);
  for (HalfType t : {HalfType::f16, HalfType::bf16})
    for (int k : kSpecialisedKernelSizes)
      for (int tile : kTiledChannelTiles) n.mma.push_back(conv2d_mma_kernel(t, k, tile));
  return n;
}

CompileRequest nn_module_request(const NnKernelNames& names) {
  return CompileRequest{kNnModuleSource, {}, names.nn};
}

CompileRequest conv2d_mma_module_request(const NnKernelNames& names) {
  return CompileRequest{kConv2dMmaSource, {}, names.mma};
}

NnKernels::NnKernels(Backend& backend, NnKernelNames names)
    : backend_(backend), names_(std::move(names)), module_(backend.compile(nn_module_request(names_))) {}

Kernel NnKernels::kernel(const std::string& name_expression) {
  if (!is_mma_kernel(name_expression)) return module_->kernel(name_expression);
  if (std::find(names_.mma.begin(), names_.mma.end(), name_expression) == names_.mma.end())
    throw UsageError("kernel '" + name_expression + "' was not in the compile request");
  if (!mma_module_) mma_module_ = backend_.compile(conv2d_mma_module_request(names_));
  return mma_module_->kernel(name_expression);
}

LaunchConfig plane_launch(const char* op, int64_t elements, int channels, int batch) {
  constexpr int kMaxGridYZ = 65535;
  if (channels > kMaxGridYZ || batch > kMaxGridYZ)
    throw UsageError(std::string(op) + ": " + std::to_string(channels) + " channels x batch " +
                     std::to_string(batch) + " exceeds the launch grid (at most 65535 each)");
  LaunchConfig cfg;
  cfg.grid = {unsigned((elements + 255) / 256), unsigned(channels), unsigned(batch)};
  cfg.block = {256, 1, 1};
  return cfg;
}

}  // namespace lab
