// The Runner interface: one per kernel (or kernel group). A runner knows its parameters, how to build its
// kernel source for a variant, how to make seeded inputs, launch on any Backend, and check the outputs
// against its own CPU reference. The CLI, scenarios, tests and the viewer all go through this.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/compare.hpp"
#include "kernels/kernel_spec.hpp"

namespace lab {

// Bytes moved (each input read once, each output written once) and floating-point operations of one launch.
struct WorkCounts {
  double bytes = 0;
  double flops = 0;
};

// One prepared problem: inputs made and uploaded, outputs allocated and poisoned. `launch` may be called
// repeatedly (benchmarks); `check` downloads outputs and compares them with the CPU reference.
class Instance {
 public:
  virtual ~Instance() = default;
  virtual void launch() = 0;
  // Tolerance overrides (from a scenario) apply to every output when set.
  virtual std::vector<OutputCheck> check(const std::optional<Tolerance>& override_tolerance) = 0;
  virtual WorkCounts work() const = 0;
  // Re-poison every output (NaN) so a following launch+check proves each element is written again.
  virtual void poison() = 0;
};

// What most instances share: the backend, and outputs allocated through `output()`, poisoned (every byte
// 0xff: NaN in float, half and bfloat16) at allocation and by each poison().
class InstanceBase : public Instance {
 public:
  void poison() override;

 protected:
  explicit InstanceBase(Backend& backend) : backend_(backend) {}
  DeviceBuffer output(size_t bytes);
  template <class T>
  DeviceBuffer output_array(size_t count) {
    return output(count * sizeof(T));
  }
  // Waits for the launches, then downloads `count` elements.
  template <class T>
  std::vector<T> fetch(const DeviceBuffer& buffer, size_t count) {
    backend_.synchronize();
    return backend_.download_vector<T>(buffer, count);
  }
  Backend& backend_;

 private:
  std::vector<std::pair<void*, size_t>> outputs_;
};

// Makes a runner's instance: inputs seeded from `seed`, uploaded; outputs allocated and poisoned.
using MakeInstance = std::function<std::unique_ptr<Instance>(Backend&, const std::string& variant,
                                                             const Params& params, uint64_t seed)>;

// The MakeInstance of an Instance class constructed from (backend, variant, params, seed).
template <class I>
MakeInstance make_instance() {
  return [](Backend& backend, const std::string& variant, const Params& params, uint64_t seed) {
    return std::unique_ptr<Instance>(std::make_unique<I>(backend, variant, params, seed));
  };
}

// A kernel spec (its metadata, rules and compile) with the function that makes its instances: everything a
// runner has of its own is the instance (inputs, reference, check).
class Runner {
 public:
  Runner(const KernelSpec& spec, MakeInstance make) : spec_(spec), make_(std::move(make)) {}
  const KernelSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const std::string& family() const { return spec_.family; }
  const std::string& description() const { return spec_.description; }
  const std::string& source_path() const { return spec_.source; }
  const std::vector<KernelVariant>& variants() const { return spec_.variants; }  // first = default
  const std::vector<ParamSpec>& params() const { return spec_.params; }
  // Defines and name expressions for a variant at these (resolved) parameters.
  CompileRequest compile_request(const std::string& variant, const Params& params) const {
    return spec_.compile_request(variant, params);
  }
  // Throws UsageError when the variant cannot run `params` (its rule), before anything is made.
  std::unique_ptr<Instance> instantiate(Backend& backend, const std::string& variant, const Params& params,
                                        uint64_t seed) const {
    check_variant_runs(spec_, variant, params);
    return make_(backend, variant, params, seed);
  }

 private:
  const KernelSpec& spec_;  // a function-local static of its spec function, alive for the program
  MakeInstance make_;
};

inline Params resolve_params(const Runner& runner, const Params& given) {
  return resolve_params(runner.spec(), given);
}
inline std::string resolve_variant(const Runner& runner, const std::string& variant) {
  return resolve_variant(runner.spec(), variant);
}

// The registry of every runner; runners register themselves with `register_runner` at static initialisation.
class Registry {
 public:
  static Registry& instance();
  void add(std::unique_ptr<Runner> runner);
  // Throws UsageError listing valid names.
  const Runner& get(const std::string& name) const;
  std::vector<const Runner*> all() const;  // sorted by family, then name

 private:
  std::vector<std::unique_ptr<Runner>> runners_;
};

// Registers the runner of `spec` (a function-local static of its spec function, alive for the program).
inline bool register_runner(const KernelSpec& spec, MakeInstance make) {
  Registry::instance().add(std::make_unique<Runner>(spec, std::move(make)));
  return true;
}

}  // namespace lab
