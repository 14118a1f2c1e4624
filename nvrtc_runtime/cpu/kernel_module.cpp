// dlopen of cpu-backend kernel modules and the parameter types their entries report.
#include "nvrtc_runtime/cpu/kernel_module.hpp"

#include <dlfcn.h>

#include "nvrtc_runtime/cpu/block_scheduler.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab::cpu {

namespace {

template <class Fn>
Fn symbol(void* handle, const std::string& name, const std::filesystem::path& file) {
  void* p = ::dlsym(handle, name.c_str());
  if (!p) throw RuntimeError("kernel module " + file.string() + " lacks the symbol " + name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

KernelModule::KernelModule(CompileResult result, const std::filesystem::path& shared_object)
    : result_(std::move(result)) {
  handle_ = ::dlopen(shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_)
    throw RuntimeError("cannot load kernel module " + shared_object.string() + ": " + ::dlerror());
  try {
    const int abi = symbol<int (*)()>(handle_, "lab_emu_module_abi", shared_object)();
    if (abi != LAB_EMU_ABI_VERSION)
      throw RuntimeError("kernel module " + shared_object.string() + " has emulator ABI " +
                         std::to_string(abi) + ", expected " + std::to_string(LAB_EMU_ABI_VERSION));
    symbol<void (*)(const lab_emu_host_api*)>(handle_, "lab_emu_bind",
                                              shared_object)(&BlockScheduler::host_api());
    for (size_t i = 0; i < result_.name_expressions.size(); ++i) {
      using Entry = const lab_emu_kernel* (*)();
      const lab_emu_kernel* entry = symbol<Entry>(handle_, result_.lowered_names[i], shared_object)();
      kernels_[result_.name_expressions[i]] = entry;
      EntrySignature& signature = signatures_[result_.name_expressions[i]];
      for (unsigned p = 0; p < entry->param_count; ++p)
        signature.add(parameter_type(*entry, p), size_t(entry->param_sizes[p]));
    }
  } catch (...) {
    ::dlclose(handle_);
    throw;
  }
}

KernelModule::~KernelModule() {
  ::dlclose(handle_);
}

Kernel KernelModule::kernel(const std::string& name_expression) const {
  auto it = kernels_.find(name_expression);
  if (it == kernels_.end())
    throw UsageError("kernel '" + name_expression + "' was not in the compile request");
  return Kernel{name_expression, const_cast<lab_emu_kernel*>(it->second), this,
                &signatures_.at(name_expression)};
}

std::string parameter_type(const lab_emu_kernel& kernel, unsigned index) {
  // The module reports __PRETTY_FUNCTION__ of lab_emu::type_name<T>(): "... [with T = const float*]".
  return pretty_function_type(kernel.param_types[index]);
}

}  // namespace lab::cpu
