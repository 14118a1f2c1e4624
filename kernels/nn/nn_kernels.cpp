// NnKernels: one compile of nn_kernels.cu with every name expression; the shared launch shape.
#include "kernels/nn/nn_kernels.hpp"

#include <algorithm>

#include "kernels/nn/conv2d_op.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

bool is_specialised_kernel_size(int k) {
  return std::find(std::begin(kSpecialisedKernelSizes), std::end(kSpecialisedKernelSizes), k) !=
         std::end(kSpecialisedKernelSizes);
}

NnKernelNames all_nn_kernel_names() {
  NnKernelNames n{{kConv2dDirectKernel, kConv2dSplitkReduceKernel}, {}};
  for (int k : kSpecialisedKernelSizes) {
    for (int tile : kTiledChannelTiles)
      for (ConvVariant v : {ConvVariant::Tiled, ConvVariant::Tf32})
        n.nn.push_back(conv_instance_name(v, k, tile));
    n.nn.push_back(conv_instance_name(ConvVariant::Depthwise, k, 0));
  }
  for (const char* k : {kMaxPool2dKernel, kUpsampleKernel, kCopyPlanesKernel}) n.nn.push_back(k);
  for (ConvVariant v : {ConvVariant::Fp16, ConvVariant::Bf16})
    for (int k : kSpecialisedKernelSizes)
      for (int tile : kTiledChannelTiles) n.mma.push_back(conv_instance_name(v, k, tile));
  for (ConvVariant v : {ConvVariant::Fp16Patch, ConvVariant::Bf16Patch})
    for (int stride : {1, 2})
      for (int tile : kTiledChannelTiles)
        if (stride == 1 || tile > 16) n.mma.push_back(conv_instance_name(v, 3, tile, stride));
  return n;
}

std::vector<CompileRequest> nn_module_requests(const NnKernelNames& names, size_t kernels_per_module) {
  const std::pair<const char*, const std::vector<std::string>*> sources[] = {{kNnModuleSource, &names.nn},
                                                                             {kConv2dMmaSource, &names.mma}};
  std::vector<CompileRequest> requests;
  for (const auto& [source, list] : sources) {
    const size_t step = std::max<size_t>(1, std::min(kernels_per_module, list->size()));
    for (size_t first = 0; first < list->size(); first += step) {
      const auto begin = list->begin() + long(first),
                 end = list->begin() + long(std::min(list->size(), first + step));
      requests.push_back(CompileRequest{source, {}, {begin, end}});
    }
  }
  return requests;
}

NnKernels::NnKernels(Backend& backend, const NnKernelNames& names, size_t kernels_per_module)
    : backend_(backend),
      requests_(nn_module_requests(names, kernels_per_module)),
      modules_(requests_.size()) {}

Kernel NnKernels::kernel(const std::string& name_expression) {
  for (size_t i = 0; i < requests_.size(); ++i) {
    const std::vector<std::string>& names = requests_[i].name_expressions;
    if (std::find(names.begin(), names.end(), name_expression) == names.end()) continue;
    if (!modules_[i]) modules_[i] = backend_.compile(requests_[i]);
    return modules_[i]->kernel(name_expression);
  }
  throw UsageError("kernel '" + name_expression + "' was not in the compile request");
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
