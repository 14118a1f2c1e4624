// Kernel specs: parameter resolution and validation, typed parameter access, variant rules.
#include "kernels/kernel_spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kernels/name_suggestion.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

std::string join(const std::vector<std::string>& v, const std::string& separator = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? separator : "") + v[i];
  return s;
}

bool parse_double(const std::string& s, double& out) {
  try {
    size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}

bool parse_bool(const std::string& s, bool& out) {
  if (s == "true" || s == "1") return out = true, true;
  if (s == "false" || s == "0") return out = false, true;
  return false;
}

std::string describe_range(const ParamSpec& p) {
  std::ostringstream s;
  if (p.power_of_two) s << "a power of two ";
  if (p.min > -1e300 && p.max < 1e300)
    s << "in [" << p.min << ", " << p.max << "]";
  else if (p.min > -1e300)
    s << ">= " << p.min;
  else if (p.max < 1e300)
    s << "<= " << p.max;
  return s.str();
}

void validate_value(const KernelSpec& spec, const ParamSpec& p, const std::string& v) {
  auto fail = [&](const std::string& rule) {
    throw UsageError("parameter " + p.name + "=" + v + " of " + spec.name + " is invalid: " + rule);
  };
  if (!p.choices.empty()) {
    if (std::find(p.choices.begin(), p.choices.end(), v) == p.choices.end())
      fail("must be one of " + join(p.choices));
    return;
  }
  double d = 0;
  bool b = false;
  switch (p.kind) {
    case ParamSpec::Kind::Bool:
      if (!parse_bool(v, b)) fail("must be true or false");
      return;
    case ParamSpec::Kind::Choice:
      return;
    case ParamSpec::Kind::Int:
      if (!parse_double(v, d) || d != std::floor(d)) fail("must be an integer");
      if (p.power_of_two && (d < 1 || (int64_t(d) & (int64_t(d) - 1)) != 0))
        fail("must be " + describe_range(p));
      break;
    case ParamSpec::Kind::Float:
      if (!parse_double(v, d) || !std::isfinite(d)) fail("must be a finite number");
      break;
  }
  if (d < p.min || d > p.max) fail("must be " + describe_range(p));
  if (p.multiple_of > 0 && int64_t(d) % p.multiple_of != 0)
    fail("must be a multiple of " + std::to_string(p.multiple_of));
}

std::string number_text(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", v);
  std::string s = text;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

const char* param_kind_name(ParamSpec::Kind kind) {
  switch (kind) {
    case ParamSpec::Kind::Int:
      return "int";
    case ParamSpec::Kind::Float:
      return "float";
    case ParamSpec::Kind::Bool:
      return "bool";
    case ParamSpec::Kind::Choice:
      return "choice";
  }
  return "?";
}

std::string param_rule(const ParamSpec& p) {
  std::string rule = param_kind_name(p.kind);
  if (!p.choices.empty()) return rule + ", one of " + join(p.choices, "|");
  const bool has_min = p.min > -1e300, has_max = p.max < 1e300;
  if (has_min && has_max)
    rule += " in [" + number_text(p.min) + ", " + number_text(p.max) + "]";
  else if (has_min)
    rule += " >= " + number_text(p.min);
  else if (has_max)
    rule += " <= " + number_text(p.max);
  if (p.power_of_two) rule += ", power of two";
  if (p.multiple_of > 0) rule += ", multiple of " + std::to_string(p.multiple_of);
  return rule;
}

Params resolve_params(const KernelSpec& spec, const Params& given) {
  std::vector<std::string> names;
  for (const ParamSpec& s : spec.params) names.push_back(s.name);
  for (auto& [k, v] : given)
    if (std::find(names.begin(), names.end(), k) == names.end())
      throw UsageError("unknown parameter '" + k + "' for " + spec.name + unknown_name_hint(k, names));
  Params out;
  for (const ParamSpec& s : spec.params) {
    auto it = given.find(s.name);
    std::string v = it != given.end() ? it->second : s.default_value;
    validate_value(spec, s, v);
    out[s.name] = v;
  }
  if (spec.validate) spec.validate(out);
  return out;
}

std::string resolve_variant(const KernelSpec& spec, const std::string& variant) {
  if (variant.empty()) return spec.variants.front().name;
  std::vector<std::string> names;
  for (const KernelVariant& v : spec.variants) {
    if (v.name == variant) return variant;
    names.push_back(v.name);
  }
  throw UsageError("unknown variant '" + variant + "' of " + spec.name + unknown_name_hint(variant, names));
}

std::string variant_refusal(const KernelSpec& spec, const std::string& variant, const Params& params) {
  for (const KernelVariant& v : spec.variants)
    if (v.name == variant && v.problem) return v.problem(params);
  return "";
}

void check_variant_runs(const KernelSpec& spec, const std::string& variant, const Params& params) {
  if (const std::string problem = variant_refusal(spec, variant, params); !problem.empty())
    throw UsageError("variant " + variant + " of " + spec.name + " cannot run these parameters: " + problem);
}

CompileRequest KernelSpec::compile_request(const std::string& variant, const Params& params) const {
  CompileRequest request = compile ? compile(variant, params) : CompileRequest{source, {}, entries};
  request.arch_specific = request.arch_specific || arch_specific;
  return request;
}

int64_t param_int(const Params& p, const std::string& name) {
  auto it = p.find(name);
  double d = 0;
  if (it == p.end() || !parse_double(it->second, d))
    throw UsageError("parameter " + name + " is not an integer");
  return int64_t(d);
}

double param_float(const Params& p, const std::string& name) {
  auto it = p.find(name);
  double d = 0;
  if (it == p.end() || !parse_double(it->second, d))
    throw UsageError("parameter " + name + " is not a number");
  return d;
}

bool param_bool(const Params& p, const std::string& name) {
  auto it = p.find(name);
  bool b = false;
  if (it == p.end() || !parse_bool(it->second, b))
    throw UsageError("parameter " + name + " is not a boolean");
  return b;
}

const std::string& param_str(const Params& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) throw UsageError("parameter " + name + " is missing");
  return it->second;
}

}  // namespace lab
