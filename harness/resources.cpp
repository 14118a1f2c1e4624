// Resource reports: compile and query; static occupancy.
#include "harness/resources.hpp"

#include "nvrtc_runtime/cuda_compiler.hpp"

namespace lab {

namespace {

void add_static_occupancy(ResourceReport& report, const std::string& arch) {
  for (const ResourceUsage& u : report.result.resources) {
    const std::optional<StaticOccupancy> o = occupancy_of(u, arch, report.occupancy_block_threads);
    if (!o) return;
    report.static_occupancy.push_back(*o);
  }
}

}  // namespace

std::array<std::string, 3> occupancy_cells(const std::vector<int>& runtime,
                                           const std::vector<StaticOccupancy>& computed, size_t i) {
  const StaticOccupancy* o = i < computed.size() ? &computed[i] : nullptr;
  std::string blocks = o ? std::to_string(o->blocks_per_sm) : "-";
  if (i < runtime.size()) {
    blocks = std::to_string(runtime[i]);
    if (o && o->blocks_per_sm != runtime[i]) blocks += " (static " + std::to_string(o->blocks_per_sm) + ")";
  }
  return {blocks, o ? std::to_string(o->active_warps) + "/" + std::to_string(o->max_warps) : "-",
          o ? o->limited_by : "-"};
}

std::optional<StaticOccupancy> occupancy_of(const ResourceUsage& usage, const std::string& arch,
                                            int block_threads) {
  const std::optional<ArchLimits> limits = arch_limits(arch);
  if (!limits) return std::nullopt;
  return static_occupancy(*limits, usage.registers.value_or(0), usage.static_shared_bytes.value_or(0),
                          block_threads, usage.max_threads_per_block.value_or(0));
}

ResourceReport compile_resources(BackendSet& backends, const CompileRequest& request, const std::string& arch,
                                 int block_threads) {
  ResourceReport report;
  report.occupancy_block_threads = block_threads;
  const RuntimeContext& ctx = backends.context();
  if (cuda_device_present() && arch == default_cuda_arch()) {
    Backend* backend = &backends.get("cuda");
    std::shared_ptr<Module> module = backend->compile(request);
    report.result = module->result();
    for (const std::string& e : request.name_expressions)
      report.occupancy.push_back(backend->occupancy_blocks_per_sm(module->kernel(e), block_threads, 0));
    add_static_occupancy(report, arch);
    return report;
  }
  report.result = nvrtc_module_compiler(ctx, arch).compile(request);
  add_static_occupancy(report, arch);
  return report;
}

}  // namespace lab
