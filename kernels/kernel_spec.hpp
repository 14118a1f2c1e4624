// A kernel family described once, as data: its source, entry points, variants with the rule for which
// parameters each can run, parameters with ranges and defaults, and how to compile a variant. The pipeline's
// op compiles from it and the registered runner (runner.hpp) is made from it; `lab list`, `lab source`,
// scenarios and the viewer read it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"

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
  int64_t multiple_of = 0;           // Int only: when set, values must be multiples of it
};

// "int", "float", "bool", "choice".
const char* param_kind_name(ParamSpec::Kind kind);
// "int in [1, 1024], power of two" or "choice, one of a|b": the rule `lab list` and the viewer show.
std::string param_rule(const ParamSpec& p);

// Typed read of a resolved parameter (throws UsageError if absent or malformed).
int64_t param_int(const Params& p, const std::string& name);
double param_float(const Params& p, const std::string& name);
bool param_bool(const Params& p, const std::string& name);
const std::string& param_str(const Params& p, const std::string& name);

struct KernelVariant {
  std::string name;
  std::string description;
  // Empty when the variant can run these resolved parameters, else the rule it breaks; none: it runs all.
  std::function<std::string(const Params&)> problem = {};
};

struct KernelSpec {
  std::string name;                     // "detect_decode"
  std::string family;                   // "detect", "attention", "loss", "nn"
  std::string description;              // one line
  std::string source;                   // tree-relative .cu
  std::vector<KernelVariant> variants;  // first = default
  std::vector<ParamSpec> params;
  // The entry points every variant exports, when `compile` is not given.
  std::vector<std::string> entries = {};
  // Cross-parameter rules after the per-parameter checks; throws UsageError naming the rule. Optional.
  std::function<void(const Params&)> validate = {};
  // Defines and name expressions of a variant at resolved parameters; default: `entries`, no defines.
  std::function<CompileRequest(const std::string& variant, const Params&)> compile = {};
  // The family uses wgmma / setmaxnreg: every variant compiles for the architecture-specific target (sm_90a on
  // sm_90; CompileRequest::arch_specific).
  bool arch_specific = false;

  CompileRequest compile_request(const std::string& variant, const Params& params) const;
};

// Fills defaults, rejects unknown names (listing the valid ones) and out-of-range values (stating the rule),
// then applies `validate`.
Params resolve_params(const KernelSpec& spec, const Params& given);
// The variant name, or the default when empty; throws UsageError listing valid variants.
std::string resolve_variant(const KernelSpec& spec, const std::string& variant);
// The rule `variant` breaks at these resolved `params` (its `problem` rule); empty when it runs them.
std::string variant_refusal(const KernelSpec& spec, const std::string& variant, const Params& params);
// Throws UsageError when `variant` cannot run `params` (its `problem` rule), naming both.
void check_variant_runs(const KernelSpec& spec, const std::string& variant, const Params& params);

}  // namespace lab
