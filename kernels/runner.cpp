// Runner registry and instances' poisoned outputs.
#include "kernels/runner.hpp"

#include <algorithm>

#include "kernels/name_suggestion.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

void InstanceBase::poison() {
  for (auto [ptr, bytes] : outputs_) backend_.fill_bytes(ptr, 0xff, bytes);
}

DeviceBuffer InstanceBase::output(size_t bytes) {
  DeviceBuffer b = backend_.alloc(bytes);
  backend_.fill_bytes(b.get(), 0xff, bytes);
  outputs_.emplace_back(b.get(), bytes);
  return b;
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
  throw UsageError("unknown kernel '" + name + "'" +
                   unknown_name_hint(name, names,
                                     "`lab list` names the " + std::to_string(names.size()) + " kernels"));
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
