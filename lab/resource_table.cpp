// Resource reports as a table and as JSON.
#include "lab/resource_table.hpp"

#include "lab/table.hpp"

namespace lab {

namespace {

std::string cell(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

nlohmann::json value(const std::optional<int>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
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
