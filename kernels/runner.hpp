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

class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string name() const = 0;                     // "detect_decode"
  virtual std::string family() const = 0;                   // "detect", "attention", "loss", "nn"
  virtual std::string description() const = 0;              // one line
  virtual std::string source_path() const = 0;              // tree-relative .cu
  virtual std::vector<KernelVariant> variants() const = 0;  // first = default
  virtual std::vector<ParamSpec> params() const = 0;
  // Extra cross-parameter validation after per-parameter checks (throws UsageError with the rule).
  virtual void validate(const Params& /*resolved*/) const {}
  // Defines and name expressions for a variant at these (resolved) parameters.
  virtual CompileRequest compile_request(const std::string& variant, const Params& params) const = 0;
  virtual std::unique_ptr<Instance> instantiate(Backend& backend, const std::string& variant,
                                                const Params& params, uint64_t seed) const = 0;
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

// A runner made from a kernel spec: its metadata and compile come from the spec, its instances from `make`.
class SpecRunner : public Runner {
 public:
  SpecRunner(const KernelSpec& spec, MakeInstance make) : spec_(spec), make_(std::move(make)) {}
  std::string name() const override { return spec_.name; }
  std::string family() const override { return spec_.family; }
  std::string description() const override { return spec_.description; }
  std::string source_path() const override { return spec_.source; }
  std::vector<KernelVariant> variants() const override { return spec_.variants; }
  std::vector<ParamSpec> params() const override { return spec_.params; }
  void validate(const Params& p) const override {
    if (spec_.validate) spec_.validate(p);
  }
  CompileRequest compile_request(const std::string& variant, const Params& params) const override {
    return spec_.compile_request(variant, params);
  }
  std::unique_ptr<Instance> instantiate(Backend& backend, const std::string& variant, const Params& params,
                                        uint64_t seed) const override {
    check_variant_runs(spec_, variant, params);
    return make_(backend, variant, params, seed);
  }

 private:
  const KernelSpec& spec_;
  MakeInstance make_;
};

// Fills defaults, rejects unknown names (listing the valid ones) and out-of-range values (stating the rule).
Params resolve_params(const Runner& runner, const Params& given);
// The variant name, or the default when empty; throws UsageError listing valid variants.
std::string resolve_variant(const Runner& runner, const std::string& variant);

// The registry of every runner; runners register themselves with a static `RunnerRegistration`.
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

template <class R>
struct RunnerRegistration {
  RunnerRegistration() { Registry::instance().add(std::make_unique<R>()); }
};

// Registers the runner of `spec` (a function-local static of its spec function, alive for the program).
inline bool register_runner(const KernelSpec& spec, MakeInstance make) {
  Registry::instance().add(std::make_unique<SpecRunner>(spec, std::move(make)));
  return true;
}

}  // namespace lab
