// A loaded kernel module of the cpu backend (dlopen'ed shared object) and the parameter types its entries
// report (the signatures every launch is checked against).
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/cpu/device/lab_emu_abi.hpp"

namespace lab::cpu {

class KernelModule : public Module {
 public:
  // Loads `shared_object`, checks its ABI version, binds the scheduler services, and looks up every kernel of
  // `result.name_expressions`. Throws RuntimeError naming the file when any of that fails.
  KernelModule(CompileResult result, const std::filesystem::path& shared_object);
  ~KernelModule() override;
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;

  const CompileResult& result() const override { return result_; }
  Kernel kernel(const std::string& name_expression) const override;

 private:
  CompileResult result_;
  void* handle_ = nullptr;
  std::map<std::string, const lab_emu_kernel*> kernels_;
  std::map<std::string, EntrySignature> signatures_;
};

// The name of parameter `index` as the host compiler spells its type ("const float*").
std::string parameter_type(const lab_emu_kernel& kernel, unsigned index);

}  // namespace lab::cpu
