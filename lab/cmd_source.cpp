// `lab source KERNEL`: the exact text handed to NVRTC after specialisation (--cuda), what came out (--ptx,
// --sass; one entry point with --entry, source lines interleaved with --interleave) and the resource table
// with a static occupancy (--resources). Uses the cuda backend's compiler, which needs no GPU.
#include <iostream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "nvrtc_runtime/assembly_listing.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "lab/option_checks.hpp"
#include "lab/resource_table.hpp"
#include "harness/scenario_runner.hpp"
#include "lab/table.hpp"

namespace lab {

namespace {

struct SourceOptions {
  std::string kernel, variant;
  std::vector<std::string> params;
  std::string entry;
  bool cuda = false, ptx = false, sass = false, resources = false, json = false, interleave = false;
  int block_threads = kOccupancyBlockThreads;
};

struct Specialised {
  const Runner* runner;
  std::string variant;
  Params params;
  CompileRequest request;
  std::string arch;
};

Specialised specialise(const SourceOptions& o, const CliState& state) {
  const Runner& runner = Registry::instance().get(o.kernel);
  Specialised s{&runner, resolve_variant(runner, o.variant), {}, {}, {}};
  s.params = resolve_params(runner, parse_param_args(o.params));
  s.request = runner.compile_request(s.variant, s.params);
  s.arch = state.arch.empty() ? default_cuda_arch() : state.arch;
  return s;
}

void show_cuda(const Specialised& s, const RuntimeContext& ctx, bool json) {
  const std::vector<std::string> options = nvrtc_options(s.request, s.arch);
  std::vector<std::string> files{s.request.source_path};
  for (const std::string& h : ctx.tree->includes_of(s.request.source_path)) files.push_back(h);
  if (json) {
    nlohmann::json out = {{"kernel", s.runner->name()},
                          {"variant", s.variant},
                          {"tree", ctx.tree->description()},
                          {"options", options},
                          {"name_expressions", s.request.name_expressions},
                          {"files", nlohmann::json::array()}};
    for (const std::string& f : files) out["files"].push_back({{"path", f}, {"text", ctx.tree->read(f)}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "// " << s.runner->name() << " variant " << s.variant
            << ", kernel tree: " << ctx.tree->description() << "\n// NVRTC " << nvrtc_version()
            << " options:\n";
  for (const std::string& o : options) std::cout << "//   " << o << "\n";
  std::cout << "// name expressions:\n";
  for (const std::string& e : s.request.name_expressions) std::cout << "//   " << e << "\n";
  for (const std::string& f : files) {
    const std::string text = ctx.tree->read(f);
    std::cout << "\n// ===== " << f << " =====\n"
              << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  }
}

void show_compiled(const SourceOptions& o, const Specialised& s, const RuntimeContext& ctx) {
  const CompileResult result = nvrtc_module_compiler(ctx, s.arch).compile(s.request);
  AssemblyListing listing = o.ptx ? parse_ptx(result.ptx) : parse_sass(disassemble_sass(result));
  use_tree_paths(listing, ctx.tree->list());
  if (!o.entry.empty()) listing = entry_listing(listing, find_entry(listing, o.entry));
  const ReadSource read_source = [&ctx](const std::string& file) {
    return ctx.tree->exists(file) ? ctx.tree->read(file) : std::string();
  };
  const std::string text = render_listing(listing, o.interleave ? &read_source : nullptr);
  if (!o.json) {
    std::cout << text;
    return;
  }
  nlohmann::json out{{"kernel", s.runner->name()}, {"arch", s.arch}, {o.ptx ? "ptx" : "sass", text}};
  out["entries"] = nlohmann::json::array();
  for (const AssemblyEntry& e : listing.entries)
    out["entries"].push_back({{"mangled", e.mangled}, {"demangled", e.demangled}});
  std::cout << out.dump(2) << "\n";
}

void show_resources(const Specialised& s, const RuntimeContext& ctx, bool json, int block_threads) {
  BackendSet backends(ctx);
  ResourceReport report = compile_resources(backends, s.request, s.arch, block_threads);
  report.label = s.runner->name() + " / " + s.variant;
  if (json) {
    std::cout << resources_json({report}).dump(2) << "\n";
    return;
  }
  print_resources(std::cout, {report});
  std::cout << "compile: " << format_fixed(report.result.compile_ms, 1) << " ms ("
            << (report.result.cache_hit ? "cache hit" : "cache miss") << "), target " << report.result.target
            << ", NVRTC " << nvrtc_version() << ", key " << report.result.cache_key.substr(0, 16) << "\n";
  const std::string at = " at " + std::to_string(report.occupancy_block_threads) + " threads per block";
  if (!report.occupancy.empty())
    std::cout << "occupancy: the runtime's (cudaOccupancyMaxActiveBlocksPerMultiprocessor)" << at << "\n";
  else if (!report.static_occupancy.empty())
    std::cout << "occupancy: static, from the " << s.arch << " limits" << at << " (no GPU)\n";
  else
    std::cout << "occupancy: no GPU and no limits table for " << s.arch << "\n";
}

}  // namespace

void add_source_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("source", "Show a kernel's specialised source, PTX, SASS or resource use");
  auto o = std::make_shared<SourceOptions>();
  cmd->add_option("KERNEL", o->kernel, "Runner name (see `lab list`)")->required();
  cmd->add_option("--variant", o->variant, "Variant (default: the runner's first)");
  cmd->add_option("--param", o->params, "Parameter NAME=VALUE (repeatable)");
  auto* cuda = cmd->add_flag("--cuda", o->cuda,
                             "The exact text handed to NVRTC: options, name expressions, files "
                             "(default)");
  auto* ptx = cmd->add_flag("--ptx", o->ptx, "PTX from NVRTC");
  auto* sass = cmd->add_flag("--sass", o->sass, "SASS of the cubin (needs nvdisasm)");
  cmd->add_option("--entry", o->entry,
                  "With --ptx/--sass: only this entry point (mangled or demangled name, e.g. "
                  "flash_attn2_fwd_tiled<64>, or the name alone when one entry has it)");
  cmd->add_flag("--interleave", o->interleave,
                "With --ptx/--sass: each source line followed by the assembly generated from it (-lineinfo)");
  auto* res = cmd->add_flag("--resources", o->resources,
                            "Registers, shared/local memory, spills, occupancy (the runtime's on a GPU, else "
                            "computed from the target's limits), compile time, cache hit");
  cmd->add_option("--block-threads", o->block_threads,
                  "With --resources: the block size occupancy is computed at (default 256)")
      ->check(in_range(1, 1024))
      ->needs(res);
  cuda->excludes(ptx, sass, res);
  ptx->excludes(sass, res);
  sass->excludes(res);
  cmd->add_option("--arch", state.arch, "Compile target, e.g. sm_90 (default: the live GPU's, else sm_90)");
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  lab source flash_attn2_fwd --ptx\n"
      "  lab source conv2d --variant v2_tiled --resources --block-threads 128\n"
      "  lab source detect_decode --sass --arch sm_90\n");
  cmd->callback([&state, o] {
    const RuntimeContext ctx = state.context();
    if ((!o->entry.empty() || o->interleave) && !o->ptx && !o->sass)
      throw UsageError(std::string(o->interleave ? "--interleave" : "--entry") + " needs --ptx or --sass");
    const Specialised s = specialise(*o, state);
    if (o->ptx || o->sass)
      show_compiled(*o, s, ctx);
    else if (o->resources)
      show_resources(s, ctx, o->json, o->block_threads);
    else
      show_cuda(s, ctx, o->json);
  });
}

}  // namespace lab
