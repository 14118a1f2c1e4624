// What a launch passes (pointers to the argument values, their sizes, the parameter struct's type), what a
// compiled entry point takes (its parameter types and sizes, read from the PTX on cuda and from the module on
// cpu), and the one check between them that both backends run before every launch.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lab {

struct KernelArgs {
  std::vector<void*> pointers;
  std::vector<size_t> sizes;
  std::string_view
      struct_type;  // kernel_params: the struct's type_key (host_type_name), e.g. "DetectDecodeParams"
};

// The parameters of an entry point; a type is "" where the backend cannot know it (an extern "C" entry on
// cuda, whose PTX name carries no types).
struct EntrySignature {
  std::vector<std::string> types;  // as the backend spells them ("const float*", "lab::DetectDecodeParams")
  std::vector<std::string> type_keys;  // type_key() of each, computed once at module load
  std::vector<size_t> sizes;
  void add(const std::string& type, size_t size);
};

// "X" from a __PRETTY_FUNCTION__ of a `template <class T>` function ("... [with T = X]" or "... [T = X]").
std::string pretty_function_type(const std::string& pretty);
// A type as every compiler here may spell it: no top-level const, spaces or namespace qualifiers (GCC's
// __PRETTY_FUNCTION__ leaves out the namespace it is written in), so two spellings compare equal.
std::string type_key(std::string type);

// The type_key of T, computed once: launches compare it without any parsing.
template <class T>
const std::string& host_type_name() {
  static const std::string name = type_key(pretty_function_type(__PRETTY_FUNCTION__));
  return name;
}

// Positional arguments (the emulator's own test kernels): sizes are checked, types are not.
template <class... A>
KernelArgs kernel_args(A&... args) {
  return KernelArgs{{static_cast<void*>(&args)...}, {sizeof(A)...}, {}};
}

// A kernel's one parameter struct, passed by value: its type and size are checked against the entry's.
// `params` must outlive the launch call (a temporary in the launch expression does).
template <class P>
KernelArgs kernel_params(const P& params) {
  static_assert(std::is_trivially_copyable_v<P> && std::is_standard_layout_v<P>,
                "a kernel parameter struct is plain data");
  return KernelArgs{{const_cast<P*>(&params)}, {sizeof(P)}, host_type_name<P>()};
}

// The entry of a cuda module: sizes from the PTX declaration of `lowered_name`, types from its demangled name
// (none for an extern "C" entry). Throws RuntimeError when the PTX lacks the entry.
EntrySignature entry_signature_from_ptx(const std::string& ptx, const std::string& lowered_name);

// Throws RuntimeError, one line naming `kernel`, when the launch passes another parameter struct than the
// entry takes, or another count or size of arguments, or a null pointer to a value.
void check_launch_arguments(const std::string& kernel, const EntrySignature& entry, const KernelArgs& args);

}  // namespace lab
