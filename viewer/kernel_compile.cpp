// Kernel compile for the viewer, built on the same calls as `lab source`.
#include "viewer/kernel_compile.hpp"

#include <sstream>

#include "harness/resources.hpp"
#include "harness/scenario_runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"

namespace lab::viewer {

namespace {

std::string describe_compiler_input(const KernelWorkspace& ws, const CompileRequest& request,
                                    const std::string& arch) {
  std::ostringstream out;
  out << "// kernel tree: " << ws.context.tree->description() << "\n// NVRTC " << nvrtc_version()
      << " options:\n";
  for (const std::string& o : nvrtc_options(request, arch)) out << "//   " << o << "\n";
  out << "// name expressions:\n";
  for (const std::string& e : request.name_expressions) out << "//   " << e << "\n";
  std::vector<std::string> files{request.source_path};
  for (const std::string& h : ws.context.tree->includes_of(request.source_path)) files.push_back(h);
  for (const std::string& f : files) {
    const std::string text = ws.context.tree->read(f);
    out << "\n// ===== " << f << " =====\n" << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  }
  return out.str();
}

}  // namespace

CompileOutcome compile_kernel(const KernelWorkspace& ws, const Runner& runner, const std::string& variant,
                              const Params& params) {
  CompileOutcome o;
  o.kernel = runner.name();
  o.variant = variant;
  o.arch = ws.context.options.arch.empty() ? default_cuda_arch() : ws.context.options.arch;
  try {
    const CompileRequest request = runner.compile_request(variant, params);
    o.compiler_input = describe_compiler_input(ws, request, o.arch);
    BackendSet backends(ws.context);
    ResourceReport report = compile_resources(backends, request, o.arch);
    o.result = std::move(report.result);
    o.occupancy = std::move(report.occupancy);
    o.occupancy_block_threads = report.occupancy_block_threads;
    o.static_occupancy = std::move(report.static_occupancy);
    o.ok = true;
    const std::vector<std::string> tree_files = ws.context.tree->list();
    o.ptx_listing = parse_ptx(o.result.ptx);
    use_tree_paths(o.ptx_listing, tree_files);
    try {
      o.sass = disassemble_sass(o.result);
      o.sass_listing = parse_sass(o.sass);
      use_tree_paths(o.sass_listing, tree_files);
    } catch (const std::exception& e) {
      o.sass = std::string("// ") + e.what() + "\n";
    }
  } catch (const CompileError& e) {
    o.diagnostics = e.diagnostics;
    o.message = e.what();
    o.result.log = e.log;
  } catch (const std::exception& e) {
    o.message = e.what();
  }
  return o;
}

}  // namespace lab::viewer
