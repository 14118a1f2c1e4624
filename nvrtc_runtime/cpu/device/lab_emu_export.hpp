// Exporting kernels from the module. The generated wrapper (one per compile) includes this after the kernel
// .cu and, for name expression i, defines
//   LAB_EMU_EXPORT const lab_emu_kernel* lab_emu_kernel_<i>(void) { return
//   lab_emu::kernel_entry<&(EXPR)>("EXPR"); }
// Taking the address instantiates a template kernel; its real parameter types A... (deduced from the function
// pointer) give the sizes the host checks the launch arguments against, and unpack `void** args` with no
// declaration repeated anywhere. Only the wrapper includes this header, once, so the definitions below are
// the module's single copies.
#pragma once

#define LAB_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace lab_emu {

// "const char* lab_emu::type_name() [with T = const float*]": the host keeps the part after "T = ".
template <class T>
const char* type_name() {
  return __PRETTY_FUNCTION__;
}

template <class... A>
struct Signature {
  static inline const unsigned long long sizes[sizeof...(A) + 1] = {sizeof(A)..., 0};
  static inline const char* const types[sizeof...(A) + 1] = {type_name<A>()..., nullptr};
};

template <class... A, size_t... I>
void call_unpacked(void (*kernel)(A...), void* const* args, std::index_sequence<I...>) {
  kernel(*static_cast<A*>(args[I])...);
}

template <class... A>
void call_unpacked_all(void (*kernel)(A...), void* const* args) {
  call_unpacked(kernel, args, std::index_sequence_for<A...>{});
}

template <auto Kernel>
void run_thread(lab_emu_thread* self, void* const* args) {
  tls_self = self;
  call_unpacked_all(Kernel, args);
}

template <class... A>
lab_emu_kernel describe(void (*)(A...), const char* name_expression, lab_emu_run_fn run) {
  return lab_emu_kernel{name_expression, unsigned(sizeof...(A)), Signature<A...>::sizes,
                        Signature<A...>::types, run};
}

template <auto Kernel>
const lab_emu_kernel* kernel_entry(const char* name_expression) {
  static const lab_emu_kernel entry = describe(Kernel, name_expression, &run_thread<Kernel>);
  return &entry;
}

}  // namespace lab_emu

LAB_EMU_EXPORT int lab_emu_module_abi(void) {
  return LAB_EMU_ABI_VERSION;
}
LAB_EMU_EXPORT void lab_emu_bind(const lab_emu_host_api* api) {
  lab_emu::host_api = api;
}
