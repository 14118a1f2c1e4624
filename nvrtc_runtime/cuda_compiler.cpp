// NVRTC compilation with caching, resource parsing and disassembly.
#include "nvrtc_runtime/cuda_compiler.hpp"

#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <cuda_runtime.h>
#include <unistd.h>

#include "nvrtc_runtime/cpu/subprocess.hpp"
#include "nvrtc_runtime/diagnostics.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/sha256.hpp"

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

std::vector<std::string> nvrtc_options(const CompileRequest& request, const std::string& arch) {
  std::vector<std::string> opts = {"--std=c++17", "--gpu-architecture=" + arch, "-lineinfo",
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

CompileResult compile_with_nvrtc(const KernelTree& tree, const DiskCache& cache,
                                 const CompileRequest& request, const std::string& arch, std::string* note) {
  const std::string source = tree.read(request.source_path);
  std::vector<std::string> header_names = tree.includes_of(request.source_path);
  std::vector<std::string> header_texts;
  for (auto& h : header_names) header_texts.push_back(tree.read(h));
  std::vector<std::string> options = nvrtc_options(request, arch);

  Sha256 key_hash;
  key_hash.field("cuda").field(nvrtc_version()).field(arch).field(request.source_path).field(source);
  for (size_t i = 0; i < header_names.size(); ++i) key_hash.field(header_names[i]).field(header_texts[i]);
  for (auto& o : options) key_hash.field(o);
  for (auto& e : request.name_expressions) key_hash.field(e);
  const std::string key = key_hash.hex();

  CompileResult result;
  result.backend = "cuda";
  result.target = arch;
  result.name_expressions = request.name_expressions;
  result.cache_key = key;

  if (auto entry = cache.load(key, note)) {
    auto& p = entry->parts;
    result.binary.assign(p["cubin"].begin(), p["cubin"].end());
    result.ptx = p["ptx"];
    result.log = p["log"];
    result.lowered_names = split_lines(p["lowered"]);
    result.compile_ms = std::atof(p["compile_ms"].c_str());
    result.cache_hit = true;
    if (result.lowered_names.size() == request.name_expressions.size() && !result.binary.empty()) {
      result.diagnostics = parse_compiler_log(result.log);
      parse_ptxas_resources(result.log, result);
      return result;
    }
    if (note) *note = "cache entry " + key + " is incomplete: recompiling";
    result = CompileResult{};
    result.backend = "cuda";
    result.target = arch;
    result.name_expressions = request.name_expressions;
    result.cache_key = key;
  }

  auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> hdr_src, hdr_name, opt;
  for (size_t i = 0; i < header_names.size(); ++i) {
    hdr_src.push_back(header_texts[i].c_str());
    hdr_name.push_back(header_names[i].c_str());
  }
  for (auto& o : options) opt.push_back(o.c_str());
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), request.source_path.c_str(), int(hdr_src.size()),
                                 hdr_src.data(), hdr_name.data()),
              "program creation");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  for (auto& e : request.name_expressions)
    check_nvrtc(nvrtcAddNameExpression(prog, e.c_str()), "name expression");
  nvrtcResult compiled = nvrtcCompileProgram(prog, int(opt.size()), opt.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  result.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, result.log.data());
  while (!result.log.empty() && result.log.back() == '\0') result.log.pop_back();
  result.diagnostics = parse_compiler_log(result.log);
  if (compiled != NVRTC_SUCCESS) {
    std::string formatted = format_diagnostics(result.diagnostics, &tree);
    if (formatted.empty()) formatted = result.log;
    throw CompileError("compiling " + request.source_path + " failed:\n" + formatted, result.diagnostics,
                       result.log);
  }
  for (auto& e : request.name_expressions) {
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
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  parse_ptxas_resources(result.log, result);

  CacheEntry entry;
  entry.parts["cubin"] = std::string(result.binary.begin(), result.binary.end());
  entry.parts["ptx"] = result.ptx;
  entry.parts["log"] = result.log;
  entry.parts["lowered"] = join_lines(result.lowered_names);
  entry.parts["compile_ms"] = std::to_string(result.compile_ms);
  entry.parts["summary"] = "cuda " + arch + " " + request.source_path;
  cache.store(key, entry, note);
  return result;
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

}  // namespace lab
