// CompiledKernel: one entry of a kernel spec compiled on a backend (the module kept alive beside the handle),
// launched with its parameter struct. What an op holds for each kernel it launches.
#pragma once
#include <memory>
#include <string>

#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

class CompiledKernel {
 public:
  CompiledKernel(Backend& backend, const KernelSpec& spec, const std::string& variant,
                 const std::string& entry, const Params& params = {})
      : backend_(&backend),
        module_(backend.compile(spec.compile_request(variant, params))),
        kernel_(module_->kernel(entry)) {}

  template <class P>
  void launch(const LaunchConfig& config, const P& params) const {
    backend_->launch(kernel_, config, kernel_params(params));
  }
  Backend& backend() const { return *backend_; }

 private:
  Backend* backend_;
  std::shared_ptr<Module> module_;
  Kernel kernel_;
};

}  // namespace lab
