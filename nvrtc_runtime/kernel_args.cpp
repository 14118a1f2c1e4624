// Entry signatures from PTX and demangled names, and the launch-argument check of both backends.
#include "nvrtc_runtime/kernel_args.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <regex>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

// The parameter types of a demangled function name ("void f<3>(float const*, lab::P)" -> {"float const*",
// "lab::P"}), split at the commas outside brackets of the last parenthesised list.
std::vector<std::string> demangled_parameter_types(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                              std::free);
  if (status != 0 || !text) return {};
  const std::string s = text.get();
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return {};
  int depth = 0;
  size_t open = close;
  for (size_t i = close + 1; i-- > 0;) {
    depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
    if (depth == 0) {
      open = i;
      break;
    }
  }
  std::vector<std::string> types;
  std::string current;
  depth = 0;
  for (size_t i = open + 1; i < close; ++i) {
    const char c = s[i];
    depth += (c == '<' || c == '(') ? 1 : (c == '>' || c == ')') ? -1 : 0;
    if (c == ',' && depth == 0) {
      types.push_back(current);
      current.clear();
    } else if (!(c == ' ' && current.empty())) {
      current += c;
    }
  }
  if (!current.empty() && current != "void") types.push_back(current);
  return types;
}

size_t ptx_scalar_bytes(const std::string& type) {
  const int bits = std::stoi(type.substr(1));  // "u32" -> 32
  return size_t(bits / 8);
}

std::string describe(std::string_view type, size_t bytes) {
  return (type.empty() ? std::string("a parameter") : std::string(type)) + " (" + std::to_string(bytes) +
         " bytes)";
}

}  // namespace

std::string type_key(std::string t) {
  static const std::regex qualifier(R"(\b\w+::)");
  t = std::regex_replace(t, qualifier, "");
  for (const std::string cv : {"const ", " const"})
    if (size_t at = t.find(cv); at == 0 || (at != std::string::npos && at + cv.size() == t.size()))
      t.erase(at, cv.size());
  std::erase(t, ' ');
  return t;
}

void EntrySignature::add(const std::string& type, size_t size) {
  types.push_back(type);
  type_keys.push_back(type_key(type));
  sizes.push_back(size);
}

std::string pretty_function_type(const std::string& pretty) {
  const size_t at = pretty.find("T = ");
  if (at == std::string::npos) return pretty;
  std::string type = pretty.substr(at + 4);
  const size_t end = type.find_first_of(";]");
  return end == std::string::npos ? type : type.substr(0, end);
}

EntrySignature entry_signature_from_ptx(const std::string& ptx, const std::string& lowered_name) {
  const size_t at = ptx.find(".entry " + lowered_name + "(");
  if (at == std::string::npos) throw RuntimeError("the PTX has no entry " + lowered_name);
  const size_t end = ptx.find(')', at);
  const std::string decl = ptx.substr(at, end - at);
  static const std::regex param(
      R"(\.param\s+(?:\.align\s+\d+\s+)?\.([bsuf]\d+)(?:\s+\.ptr)?(?:\s+\.\w+)*(?:\s+\.align\s+\d+)?\s+\S+?_param_\d+(?:\[(\d+)\])?)");
  std::vector<size_t> sizes;
  for (auto it = std::sregex_iterator(decl.begin(), decl.end(), param); it != std::sregex_iterator(); ++it) {
    const size_t element = ptx_scalar_bytes((*it)[1]);
    sizes.push_back((*it)[2].matched ? element * std::stoul((*it)[2]) : element);
  }
  std::vector<std::string> types = demangled_parameter_types(lowered_name);
  if (types.size() != sizes.size()) types.assign(sizes.size(), "");
  EntrySignature sig;
  for (size_t i = 0; i < sizes.size(); ++i) sig.add(types[i], sizes[i]);
  return sig;
}

void check_launch_arguments(const std::string& kernel, const EntrySignature& entry, const KernelArgs& args) {
  const auto name = [&] { return "kernel " + kernel; };  // built only when a check fails
  const size_t count = entry.sizes.size();
  if (!args.struct_type.empty()) {
    const bool same_type = count == 1 && (entry.types[0].empty() || entry.type_keys[0] == args.struct_type);
    if (!same_type || entry.sizes[0] != args.sizes[0]) {
      const std::string takes = count == 1 ? describe(entry.types[0], entry.sizes[0])
                                           : std::to_string(count) + " positional arguments";
      throw RuntimeError(name() + " takes " + takes + " but the launch passes " +
                         describe(args.struct_type, args.sizes[0]));
    }
  }
  if (args.pointers.size() != count || args.sizes.size() != count) {
    std::string types;
    for (size_t i = 0; i < count; ++i)
      types += (i ? ", " : "") +
               (entry.types[i].empty() ? std::to_string(entry.sizes[i]) + " bytes" : entry.types[i]);
    throw RuntimeError(name() + " takes " + std::to_string(count) + " arguments (" + types +
                       ") but the launch passes " + std::to_string(args.pointers.size()));
  }
  for (size_t i = 0; i < count; ++i) {
    if (args.sizes[i] != entry.sizes[i])
      throw RuntimeError(name() + ": argument " + std::to_string(i) + " has " +
                         std::to_string(args.sizes[i]) + " bytes but parameter " + std::to_string(i) + " (" +
                         entry.types[i] + ") has " + std::to_string(entry.sizes[i]));
    if (!args.pointers[i])
      throw RuntimeError(name() + ": argument " + std::to_string(i) + " is a null pointer to its value");
  }
}

}  // namespace lab
