// NVRTC compilation (its step of cached_compile), resource parsing and disassembly.
#include "nvrtc_runtime/cuda_compiler.hpp"

#include <nvrtc.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <cuda_runtime.h>
#include <unistd.h>

#include "nvrtc_runtime/cached_compile.hpp"
#include "nvrtc_runtime/compile_log.hpp"
#include "nvrtc_runtime/cpu/subprocess.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace fs = std::filesystem;
namespace {

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw RuntimeError(std::string("NVRTC ") + what + " failed: " + nvrtcGetErrorString(r));
}

std::string find_on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::istringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    fs::path p = fs::path(dir) / exe;
    if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += x + "\n";
  return s;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

}  // namespace

std::string cuda_home() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v && fs::is_directory(v)) return v;
  if (std::string nvcc = find_on_path("nvcc"); !nvcc.empty())
    return fs::path(nvcc).parent_path().parent_path();
  return "/usr/local/cuda";
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "version query");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string default_cuda_arch() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "sm_90";
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "sm_90";
  return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
}

std::string nvrtc_target(const CompileRequest& request, const std::string& arch) {
  return request.arch_specific && arch == "sm_90" ? "sm_90a" : arch;
}

std::vector<std::string> nvrtc_options(const CompileRequest& request, const std::string& arch) {
  std::vector<std::string> opts = {"--std=c++17", "--gpu-architecture=" + nvrtc_target(request, arch), "-lineinfo",
                                   "--ptxas-options=-v", "-I" + cuda_home() + "/include"};
  for (const auto& d : request.defines) opts.push_back("-D" + d);
  return opts;
}

void parse_ptxas_resources(const std::string& log, CompileResult& result) {
  static const std::regex entry_re(R"(Compiling entry function '([^']+)')");
  static const std::regex props_re(R"(Function properties for (\S+))");
  static const std::regex frame_re(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used_re(R"(Used (\d+) registers)");
  static const std::regex smem_re(R"((\d+) bytes smem)");
  static const std::regex cmem_re(R"((\d+) bytes cmem\[0\])");
  result.resources.assign(result.name_expressions.size(), ResourceUsage{});
  for (size_t i = 0; i < result.name_expressions.size(); ++i)
    result.resources[i].kernel = result.name_expressions[i];
  auto index_of = [&](const std::string& mangled) -> int {
    for (size_t i = 0; i < result.lowered_names.size(); ++i)
      if (result.lowered_names[i] == mangled) return int(i);
    return -1;
  };
  int current = -1;
  for (const std::string& line : split_lines(log)) {
    std::smatch m;
    if (std::regex_search(line, m, entry_re) || std::regex_search(line, m, props_re)) {
      current = index_of(m[1]);
      continue;
    }
    if (current < 0) continue;
    ResourceUsage& r = result.resources[current];
    if (std::regex_search(line, m, frame_re)) {
      r.local_bytes = std::stoi(m[1]);
      r.spill_stores = std::stoi(m[2]);
      r.spill_loads = std::stoi(m[3]);
    }
    if (std::regex_search(line, m, used_re)) {
      r.registers = std::stoi(m[1]);
      r.static_shared_bytes = std::regex_search(line, m, smem_re) ? std::stoi(m[1]) : 0;
      if (std::regex_search(line, m, cmem_re)) r.constant_bytes = std::stoi(m[1]);
    }
  }
}

namespace {

// NVRTC on a snapshot (the source, then its headers as in-memory files); false when it rejects the source.
bool run_nvrtc(const std::vector<std::string>& options, const SourceSnapshot& sources,
               CompileResult& result) {
  std::vector<const char*> header_texts, header_names, option_list;
  for (size_t i = 1; i < sources.size(); ++i) {
    header_texts.push_back(sources[i].text.c_str());
    header_names.push_back(sources[i].path.c_str());
  }
  for (auto& o : options) option_list.push_back(o.c_str());
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, sources.front().text.c_str(), sources.front().path.c_str(),
                                 int(header_texts.size()), header_texts.data(), header_names.data()),
              "program creation");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  for (auto& e : result.name_expressions)
    check_nvrtc(nvrtcAddNameExpression(prog, e.c_str()), "name expression");
  nvrtcResult compiled = nvrtcCompileProgram(prog, int(option_list.size()), option_list.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  result.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, result.log.data());
  while (!result.log.empty() && result.log.back() == '\0') result.log.pop_back();
  if (compiled != NVRTC_SUCCESS) return false;
  for (auto& e : result.name_expressions) {
    const char* lowered = nullptr;
    check_nvrtc(nvrtcGetLoweredName(prog, e.c_str(), &lowered), ("lowered name of " + e).c_str());
    result.lowered_names.push_back(lowered);
  }
  size_t ptx_size = 0, cubin_size = 0;
  check_nvrtc(nvrtcGetPTXSize(prog, &ptx_size), "PTX size");
  result.ptx.resize(ptx_size);
  check_nvrtc(nvrtcGetPTX(prog, result.ptx.data()), "PTX");
  while (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
  check_nvrtc(nvrtcGetCUBINSize(prog, &cubin_size), "CUBIN size");
  result.binary.resize(cubin_size);
  check_nvrtc(nvrtcGetCUBIN(prog, reinterpret_cast<char*>(result.binary.data())), "CUBIN");
  parse_ptxas_resources(result.log, result);
  return true;
}

}  // namespace

CompileResult compile_with_nvrtc(const KernelTree& tree, const DiskCache& cache,
                                 const CompileRequest& request, const std::string& arch, std::string* note) {
  const std::vector<std::string> options = nvrtc_options(request, arch);
  CompileStep step;
  step.backend = "cuda";
  step.target = nvrtc_target(request, arch);
  step.key_inputs = {nvrtc_version()};
  step.key_inputs.insert(step.key_inputs.end(), options.begin(), options.end());
  step.compile = [&options](const SourceSnapshot& sources, CompileResult& result) {
    return run_nvrtc(options, sources, result);
  };
  step.store = [](const CompileResult& result, CacheEntry& entry) {
    entry.parts["cubin"] = std::string(result.binary.begin(), result.binary.end());
    entry.parts["ptx"] = result.ptx;
    entry.parts["lowered"] = join_lines(result.lowered_names);
  };
  step.load = [](CacheEntry& entry, CompileResult& result) -> std::string {
    auto& parts = entry.parts;
    result.binary.assign(parts["cubin"].begin(), parts["cubin"].end());
    result.ptx = parts["ptx"];
    result.lowered_names = split_lines(parts["lowered"]);
    if (result.lowered_names.size() != result.name_expressions.size() || result.binary.empty())
      return "is incomplete";
    parse_ptxas_resources(result.log, result);
    return "";
  };
  return cached_compile(tree, cache, request, step, note);
}

std::string disassemble_sass(const CompileResult& result) {
  std::string nvdisasm = find_on_path("nvdisasm");
  if (nvdisasm.empty() && ::access((cuda_home() + "/bin/nvdisasm").c_str(), X_OK) == 0)
    nvdisasm = cuda_home() + "/bin/nvdisasm";
  if (nvdisasm.empty())
    throw RuntimeError("SASS needs nvdisasm, which is neither on PATH nor in " + cuda_home() +
                       "/bin (scripts/install-deps.sh installs it from the nvidia-cuda-nvdisasm wheel)");
  if (result.backend != "cuda" || result.binary.empty())
    throw UsageError("SASS is only available for cuda-backend (cubin) compiles");
  fs::path tmp = fs::temp_directory_path() / ("lab-sass-" + std::to_string(::getpid()) + ".cubin");
  std::ofstream(tmp, std::ios::binary)
      .write(reinterpret_cast<const char*>(result.binary.data()), std::streamsize(result.binary.size()));
  cpu::ProcessResult run = cpu::run_process({nvdisasm, "-c", "-g", tmp.string()});
  fs::remove(tmp);
  if (run.exit_code != 0) throw RuntimeError("nvdisasm failed: " + run.output);
  return run.output;
}

ModuleCompiler nvrtc_module_compiler(const RuntimeContext& context, const std::string& arch) {
  return ModuleCompiler(
      context.options,
      [context, arch](const CompileRequest& r, std::string* note) {
        return compile_with_nvrtc(*context.tree, *context.cache, r, arch, note);
      },
      [arch](const CompileRequest& r) { return nvrtc_command_line(r, arch); });
}

}  // namespace lab
