// Runner registry, parameter resolution and validation, typed parameter access.
#include "kernels/runner.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"
#include "kernels/name_suggestion.hpp"

namespace lab {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
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

void validate_value(const Runner& r, const ParamSpec& p, const std::string& v) {
  auto fail = [&](const std::string& rule) {
    throw UsageError("parameter " + p.name + "=" + v + " of " + r.name() + " is invalid: " + rule);
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
}

}  // namespace

Params resolve_params(const Runner& runner, const Params& given) {
  const auto specs = runner.params();
  std::vector<std::string> names;
  for (auto& s : specs) names.push_back(s.name);
  for (auto& [k, v] : given)
    if (std::find(names.begin(), names.end(), k) == names.end())
      throw UsageError("unknown parameter '" + k + "' for " + runner.name() + unknown_name_hint(k, names));
  Params out;
  for (auto& s : specs) {
    auto it = given.find(s.name);
    std::string v = it != given.end() ? it->second : s.default_value;
    validate_value(runner, s, v);
    out[s.name] = v;
  }
  runner.validate(out);
  return out;
}

std::string resolve_variant(const Runner& runner, const std::string& variant) {
  auto vs = runner.variants();
  if (variant.empty()) return vs.front().name;
  std::vector<std::string> names;
  for (auto& v : vs) {
    if (v.name == variant) return variant;
    names.push_back(v.name);
  }
  throw UsageError("unknown variant '" + variant + "' of " + runner.name() + unknown_name_hint(variant, names));
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

Registry& Registry::instance() {
  static Registry r;
  return r;
}

void Registry::add(std::unique_ptr<Runner> runner) {
  runners_.push_back(std::move(runner));
}

const Runner& Registry::get(const std::string& name) const {
  std::vector<std::string> names;
  for (auto* r : all()) {
    if (r->name() == name) return *r;
    names.push_back(r->name());
  }
  throw UsageError("unknown kernel '" + name + "'" + unknown_name_hint(name, names));
}

std::vector<const Runner*> Registry::all() const {
  std::vector<const Runner*> out;
  for (auto& r : runners_) out.push_back(r.get());
  std::sort(out.begin(), out.end(), [](const Runner* a, const Runner* b) {
    return std::make_pair(a->family(), a->name()) < std::make_pair(b->family(), b->name());
  });
  return out;
}

}  // namespace lab
