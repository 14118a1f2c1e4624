// Resource reports: compile, query, tabulate.
#include "lab/resource_table.hpp"


#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/compile_log.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

std::string cell(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

nlohmann::json value(const std::optional<int>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

void add_static_occupancy(ResourceReport& report, const std::string& arch) {
  for (const ResourceUsage& u : report.result.resources) {
    const std::optional<StaticOccupancy> o = occupancy_of(u, arch, report.occupancy_block_threads);
    if (!o) return;
    report.static_occupancy.push_back(*o);
  }
}

nlohmann::json static_json(const ResourceReport& r, size_t i) {
  if (i >= r.static_occupancy.size()) return nlohmann::json();
  const StaticOccupancy& o = r.static_occupancy[i];
  return {{"blocks_per_sm", o.blocks_per_sm},
          {"active_warps", o.active_warps},
          {"max_warps", o.max_warps},
          {"limited_by", o.limited_by}};
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
  std::string note;
  const auto started = std::chrono::steady_clock::now();
  report.result = compile_with_nvrtc(*ctx.tree, *ctx.cache, request, arch, &note);
  log_compile(ctx.options, request, report.result, nvrtc_command_line(request, arch), started, note);
  add_static_occupancy(report, arch);
  return report;
}

void print_resources(std::ostream& os, const std::vector<ResourceReport>& reports) {
  const int threads = reports.empty() ? 0 : reports.front().occupancy_block_threads;
  Table table({"kernel / variant", "name expression", "regs", "static smem", "stack", "spill st", "spill ld",
               "cmem", "max thr/blk",
               threads ? "blocks/SM @" + std::to_string(threads) : std::string("blocks/SM"), "warps/SM",
               "limited by", "compile", "cache"});
  for (const ResourceReport& r : reports) {
    for (size_t i = 0; i < r.result.resources.size(); ++i) {
      const ResourceUsage& u = r.result.resources[i];
      const std::array<std::string, 3> occupancy = occupancy_cells(r.occupancy, r.static_occupancy, i);
      table.add({r.label, u.kernel, cell(u.registers), cell(u.static_shared_bytes), cell(u.local_bytes),
                 cell(u.spill_stores), cell(u.spill_loads), cell(u.constant_bytes),
                 cell(u.max_threads_per_block), occupancy[0], occupancy[1], occupancy[2], format_fixed(r.result.compile_ms, 1) + " ms", r.result.cache_hit ? "hit" : "miss"});
    }
  }
  table.print(os);
}

nlohmann::json resources_json(const std::vector<ResourceReport>& reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const ResourceReport& r : reports) {
    nlohmann::json kernels = nlohmann::json::array();
    for (size_t i = 0; i < r.result.resources.size(); ++i) {
      const ResourceUsage& u = r.result.resources[i];
      kernels.push_back({{"name_expression", u.kernel},
                         {"lowered_name", i < r.result.lowered_names.size() ? r.result.lowered_names[i] : ""},
                         {"registers", value(u.registers)},
                         {"static_shared_bytes", value(u.static_shared_bytes)},
                         {"local_bytes", value(u.local_bytes)},
                         {"spill_stores", value(u.spill_stores)},
                         {"spill_loads", value(u.spill_loads)},
                         {"constant_bytes", value(u.constant_bytes)},
                         {"max_threads_per_block", value(u.max_threads_per_block)},
                         {"occupancy_blocks_per_sm",
                          i < r.occupancy.size() ? nlohmann::json(r.occupancy[i]) : nlohmann::json()},
                         {"static_occupancy", static_json(r, i)}});
    }
    out.push_back({{"label", r.label},
                   {"target", r.result.target},
                   {"compile_ms", r.result.compile_ms},
                   {"cache_hit", r.result.cache_hit},
                   {"cache_key", r.result.cache_key},
                   {"occupancy_block_threads", r.occupancy_block_threads},
                   {"kernels", kernels}});
  }
  return out;
}

}  // namespace lab
