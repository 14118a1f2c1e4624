// The cpu backend: compile through the host compiler, host memory, launches on the worker pool, copies to
// the host that land when the host waits for their lane (HostCopyLanes).
#include "nvrtc_runtime/cpu/cpu_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "nvrtc_runtime/cpu/block_scheduler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/cpu/host_compiler.hpp"
#include "nvrtc_runtime/cpu/host_copy_lanes.hpp"
#include "nvrtc_runtime/module_compiler.hpp"
#include "nvrtc_runtime/cpu/host_memory.hpp"
#include "nvrtc_runtime/cpu/kernel_module.hpp"
#include "nvrtc_runtime/cpu/worker_pool.hpp"
#include "nvrtc_runtime/temporary_folder.hpp"

namespace lab {

namespace {

// The H200's opt-in shared memory per block, so runners pick the same configurations on both backends.
constexpr size_t kSharedPerBlockOptin = 227 * 1024;

unsigned worker_threads() {
  if (const char* env = std::getenv("LAB_CPU_THREADS"); env && *env) {
    const int n = std::atoi(env);
    if (n < 1) throw UsageError(std::string("LAB_CPU_THREADS must be a positive integer, not '") + env + "'");
    return unsigned(n);
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

std::string dim_text(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// The pointers a launch passes, to name the buffer a fault missed: pointer parameters as "argument 0
// (float*)", and every pointer-aligned word of a parameter struct as "the word at byte 32 of argument 0
// (lab::DetectDecodeParams)" (the field at that offset of the struct in its _params.cuh).
std::vector<cpu::NamedPointer> pointer_arguments(const cpu::GridJob& job) {
  std::vector<cpu::NamedPointer> pointers;
  for (unsigned i = 0; i < job.kernel->param_count; ++i) {
    const std::string type = cpu::parameter_type(*job.kernel, i);
    const std::string argument = "argument " + std::to_string(i) + " (" + type + ")";
    const size_t size = job.kernel->param_sizes[i];
    if (size == sizeof(void*) && !type.empty() && type.back() == '*') {
      pointers.push_back({argument, *static_cast<const void* const*>(job.args[i])});
    } else if (size > sizeof(void*)) {
      const auto* bytes = static_cast<const char*>(job.args[i]);
      for (size_t at = 0; at + sizeof(void*) <= size; at += sizeof(void*)) {
        const void* word = nullptr;
        std::memcpy(&word, bytes + at, sizeof(void*));
        pointers.push_back({"the word at byte " + std::to_string(at) + " of " + argument, word});
      }
    }
  }
  return pointers;
}

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(RuntimeContext context)
      : context_(std::move(context)),
        compiler_(cpu::HostCompiler::from_environment()),
        memory_(context_.options.check_bounds),
        pool_(worker_threads(), context_.options.timeout_seconds,
              [this](const void* address, const cpu::GridJob& job) {
                return std::string(memory_.guarded() ? "out-of-bounds access: " : "invalid memory access: ") +
                       memory_.describe_address(address, pointer_arguments(job));
              }) {}

  std::string name() const override { return "cpu"; }

  DeviceInfo device() const override {
    DeviceInfo info;
    info.name = "host CPU (" + std::to_string(pool_.size()) + " threads)";
    info.arch = compiler_.version_line();
    info.multiprocessors = int(pool_.size());
    info.shared_per_block_optin = kSharedPerBlockOptin;
    return info;
  }

  std::shared_ptr<Module> compile(const CompileRequest& request) override {
    CompileResult result = modules_.compile(request);
    const TemporaryFolder folder("lab-cpu-build");  // removed once loaded: dlopen keeps its mapping
    const std::filesystem::path shared_object = cpu::write_shared_object(result, folder.path());
    return std::make_shared<cpu::KernelModule>(std::move(result), shared_object);
  }

  void precompile(const std::vector<CompileRequest>& requests) override { modules_.precompile(requests); }

  DeviceBuffer alloc(size_t bytes) override { return DeviceBuffer(this, memory_.allocate(bytes), bytes); }

  // The synchronous copies wait for the main lane, as cuda's do: the copies to the host it covers land first.
  void upload(void* device_dst, const void* host_src, size_t bytes) override {
    upload_async(device_dst, host_src, bytes);
    copy_lanes_.wait(0);
  }
  void upload_async(void* device_dst, const void* host_src, size_t bytes) override {
    memory_.check_range(device_dst, bytes, "upload");
    profiled(kCopyToDevice, 0, [&] { std::memcpy(device_dst, host_src, bytes); });
  }

  void download(void* host_dst, const void* device_src, size_t bytes) override {
    memory_.check_range(device_src, bytes, "download");
    copy_lanes_.wait(0);
    profiled(kCopyToHost, 0, [&] { std::memcpy(host_dst, device_src, bytes); });
  }
  void download_async(void* host_dst, const void* device_src, size_t bytes) override {
    memory_.check_range(device_src, bytes, "download");
    profiled(kCopyToHost, 0, [&] { copy_lanes_.download_async(host_dst, device_src, bytes); });
  }
  HostBuffer alloc_host(size_t bytes) override { return cpu::HostCopyLanes::alloc_host(bytes); }

  void fork_lane(int lane) override { copy_lanes_.fork(lane); }
  void use_lane(int lane) override { copy_lanes_.use(lane); }
  void join_lane(int lane) override { copy_lanes_.join(lane); }
  void join_lanes() override { copy_lanes_.join_all(); }
  void wait_lane(int lane) override { copy_lanes_.wait(lane); }

  void fill_bytes(void* device_dst, uint8_t value, size_t bytes) override {
    memory_.check_range(device_dst, bytes, "fill");
    profiled(kFill, 0, [&] { std::memset(device_dst, value, bytes); });
  }
  TensorMap tensor_map(const TensorMapDesc& desc) override { return emulator_tensor_map(desc); }

  void launch(const Kernel& kernel, const LaunchConfig& config, const KernelArgs& args) override {
    if (!kernel.handle || !dynamic_cast<const cpu::KernelModule*>(kernel.module))
      throw UsageError("kernel '" + kernel.name_expression + "' does not come from a cpu-backend module");
    const auto& entry = *static_cast<const lab_emu_kernel*>(kernel.handle);
    const std::string name = "kernel " + kernel.name_expression;
    const Dim3 &g = config.grid, &b = config.block;
    if (!g.x || !g.y || !g.z || g.y > 65535 || g.z > 65535)
      throw RuntimeError(name + ": invalid grid " + dim_text(g) + " (each dimension >= 1, y and z <= 65535)");
    if (!b.x || !b.y || !b.z || b.z > 64 || uint64_t(b.x) * b.y * b.z > cpu::BlockScheduler::kMaxThreads)
      throw RuntimeError(name + ": invalid block " + dim_text(b) + " (at most 1024 threads, z <= 64)");
    if (config.dynamic_shared_bytes > kSharedPerBlockOptin)
      throw RuntimeError(name + ": " + std::to_string(config.dynamic_shared_bytes) +
                         " bytes of dynamic shared memory exceed the limit of " +
                         std::to_string(kSharedPerBlockOptin));
    check_launch_arguments(kernel.name_expression, *kernel.signature, args);
    cpu::GridJob job;
    job.kernel = &entry;
    job.args = args.pointers.data();
    job.grid = {g.x, g.y, g.z};
    job.block = {b.x, b.y, b.z};
    job.dynamic_shared_bytes = config.dynamic_shared_bytes;
    std::lock_guard lock(launch_mutex_);
    profiled_locked(kernel.name_expression, (unsigned long long)g.x * g.y * g.z, [&] {
      if (std::string failure = pool_.run(job); !failure.empty()) throw RuntimeError(name + " " + failure);
    });
    if (std::string overrun = memory_.check_padding(); !overrun.empty())
      throw RuntimeError(name + " " + overrun);
  }

  void start_launch_profile(LaunchProfileTiming) override {  // lanes run in order: every launch alone
    std::lock_guard lock(launch_mutex_);
    profiling_ = true;
    samples_.clear();
    profile_start_ = std::chrono::steady_clock::now();
  }
  std::vector<LaunchSample> stop_launch_profile() override {
    std::lock_guard lock(launch_mutex_);
    profiling_ = false;
    return std::move(samples_);
  }

  void synchronize() override { copy_lanes_.wait(0); }

  double time_ms(const std::function<void()>& work) override {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  bool has_device_timing() const override { return false; }
  bool can_capture_graphs() const override { return false; }
  // A launch runs to completion before the next starts, so a programmatic dependent's wait is met at once.
  bool programmatic_launch() const override { return context_.options.programmatic_launch; }
  // The emulator models wgmma, TMA, mbarrier and setmaxnreg.
  bool runs_arch_specific_kernels() const override { return true; }

  void release(void* ptr) noexcept override { memory_.release(ptr); }

 private:
  RuntimeContext context_;
  cpu::HostCompiler compiler_;
  ModuleCompiler modules_{
      context_.options,
      [this](const CompileRequest& r, std::string* note) {
        return cpu::build_kernel_module(*context_.tree, *context_.cache, r, compiler_, note);
      },
      [this](const CompileRequest& r) { return cpu::host_compile_command_line(compiler_, r); }};
  cpu::HostMemory memory_;
  cpu::HostCopyLanes copy_lanes_;
  cpu::WorkerPool pool_;
  std::mutex launch_mutex_;
  // Runs `work`, sampled on the wall clock while the launch profile is on; the caller holds launch_mutex_.
  template <class Work>
  void profiled_locked(const std::string& what, unsigned long long blocks, Work&& work) {
    if (!profiling_) return work();
    const auto start = std::chrono::steady_clock::now();
    work();
    using Ms = std::chrono::duration<double, std::milli>;
    samples_.push_back({what, blocks, Ms(std::chrono::steady_clock::now() - start).count(),
                        Ms(start - profile_start_).count(), 0});
  }
  template <class Work>
  void profiled(const std::string& what, unsigned long long blocks, Work&& work) {
    std::lock_guard lock(launch_mutex_);
    profiled_locked(what, blocks, std::forward<Work>(work));
  }

  bool profiling_ = false;  // the launch profile (guarded by launch_mutex_)
  std::vector<LaunchSample> samples_;
  std::chrono::steady_clock::time_point profile_start_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const RuntimeContext& context) {
  return std::make_unique<CpuBackend>(context);
}

}  // namespace lab
