// The Runner interface: one per kernel (or kernel group). A runner knows its parameters, how to build its
// kernel source for a variant, how to make seeded inputs, launch on any Backend, and check the outputs
// against its own CPU reference. The CLI, scenarios, tests and the viewer all go through this.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/compare.hpp"

namespace lab {

// Parameter values by name, as text ("64", "0.125", "true"); `resolve_params` fills defaults and validates.
using Params = std::map<std::string, std::string>;

struct ParamSpec {
  enum class Kind { Int, Float, Bool, Choice };
  std::string name;
  Kind kind = Kind::Int;
  std::string default_value;
  std::string help;
  double min = -1e300, max = 1e300;  // Int / Float range, inclusive
  bool power_of_two = false;         // Int only
  std::vector<std::string> choices;  // Choice only (also allowed for Int: listed values)
};

// Typed read of a resolved parameter (throws UsageError if absent or malformed).
int64_t param_int(const Params& p, const std::string& name);
double param_float(const Params& p, const std::string& name);
bool param_bool(const Params& p, const std::string& name);
const std::string& param_str(const Params& p, const std::string& name);

struct KernelVariant {
  std::string name;
  std::string description;
};

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

}  // namespace lab
