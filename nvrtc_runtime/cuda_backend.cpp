// CUDA backend: module load, launches, device memory and event timing, every call checked.
#include "nvrtc_runtime/cuda_backend.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <vector>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/cuda_tensor_map.hpp"
#include "nvrtc_runtime/compile_log.hpp"
#include "nvrtc_runtime/module_compiler.hpp"

namespace lab {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeError(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

class CudaModule : public Module {
 public:
  explicit CudaModule(CompileResult result) : result_(std::move(result)) {
    check(cudaLibraryLoadData(&library_, result_.binary.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cudaLibraryLoadData(" + result_.cache_key.substr(0, 12) + ")");
    for (size_t i = 0; i < result_.name_expressions.size(); ++i) {
      cudaKernel_t k = nullptr;
      check(cudaLibraryGetKernel(&k, library_, result_.lowered_names[i].c_str()),
            "cudaLibraryGetKernel(" + result_.name_expressions[i] + ")");
      kernels_[result_.name_expressions[i]] = k;
      signatures_[result_.name_expressions[i]] =
          entry_signature_from_ptx(result_.ptx, result_.lowered_names[i]);
      cudaFuncAttributes attr{};
      if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k)) == cudaSuccess) {
        // The loaded function's own figures fill what the ptxas report left out (on the H200 the report of
        // psa.cu compiled for psa_pack_qkv alone had no resource lines), so occupancy never reads 0
        // registers.
        ResourceUsage& usage = result_.resources[i];
        usage.max_threads_per_block = attr.maxThreadsPerBlock;
        if (!usage.registers) usage.registers = attr.numRegs;
        if (!usage.static_shared_bytes) usage.static_shared_bytes = int(attr.sharedSizeBytes);
        if (!usage.local_bytes) usage.local_bytes = int(attr.localSizeBytes);
        if (!usage.constant_bytes) usage.constant_bytes = int(attr.constSizeBytes);
      }
      cudaGetLastError();
    }
  }
  ~CudaModule() override {
    if (library_) cudaLibraryUnload(library_);
  }
  const CompileResult& result() const override { return result_; }
  // Lets entry `fn` of this module launch with `bytes` of dynamic shared memory (over 48 KB): the attribute
  // stays on the function, so the driver is called once per size increase, not per launch (the call sat
  // between `lab bench`'s events, about a microsecond of a 16-bit PSA core's 11).
  void allow_dynamic_shared(const void* fn, size_t bytes, const std::string& name) const {
    std::lock_guard<std::mutex> lock(dynamic_shared_mutex_);
    size_t& allowed = dynamic_shared_allowed_[fn];
    if (bytes <= allowed) return;
    check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          "kernel " + name + ": opting in to " + std::to_string(bytes) + " bytes of dynamic shared memory");
    allowed = bytes;
  }
  Kernel kernel(const std::string& name) const override {
    auto it = kernels_.find(name);
    if (it == kernels_.end()) throw UsageError("kernel '" + name + "' was not in the compile request");
    return Kernel{name, reinterpret_cast<void*>(it->second), this, &signatures_.at(name)};
  }

 private:
  CompileResult result_;
  cudaLibrary_t library_ = nullptr;
  std::map<std::string, cudaKernel_t> kernels_;
  std::map<std::string, EntrySignature> signatures_;
  mutable std::mutex dynamic_shared_mutex_;
  mutable std::map<const void*, size_t> dynamic_shared_allowed_;  // bytes opted in to, per entry
};

// A captured stream sequence, instantiated once and launched as one graph on the backend's stream.
class CudaLaunchGraph : public LaunchGraph {
 public:
  CudaLaunchGraph(cudaGraph_t graph, cudaStream_t stream) : stream_(stream) {
    cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate");
  }
  ~CudaLaunchGraph() override { cudaGraphExecDestroy(exec_); }
  void replay() override { check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch"); }

 private:
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_;
};

// Everything runs on one non-blocking stream of its own (stream capture cannot record the legacy default
// stream); copies are asynchronous on that stream followed by a stream synchronisation.
// The constructor makes the backend's device (RuntimeOptions::device) current on the constructing thread;
// Makes the options' device current on this thread; its name, compile target (the options' arch, else its
// own) and limits.
DeviceInfo select_device(const RuntimeOptions& options) {
  const int ordinal = options.device;
  check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.name = prop.name;
  info.arch =
      options.arch.empty() ? "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) : options.arch;
  info.multiprocessors = prop.multiProcessorCount;
  info.shared_per_block_optin = prop.sharedMemPerBlockOptin;
  return info;
}

int compute_capability_major(int ordinal) {
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal),
        "cudaDeviceGetAttribute(compute capability)");
  return major;
}

// CUDA's current device is per thread, so one backend is driven from that thread (lab detect --devices
// gives each GPU a worker thread with its own backend).
class CudaBackend : public Backend {
 public:
  explicit CudaBackend(RuntimeContext context)
      : context_(std::move(context)),
        info_(select_device(context_.options)),
        modules_(nvrtc_module_compiler(context_, info_.arch)),
        programmatic_(context_.options.programmatic_launch &&
                      compute_capability_major(context_.options.device) >= 9),
        arch_specific_(info_.arch == "sm_90") {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    current_ = stream_;
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~CudaBackend() override {
    for (Lane& lane : lanes_) {
      cudaEventDestroy(lane.done);
      cudaStreamDestroy(lane.stream);
    }
    if (fork_) cudaEventDestroy(fork_);
    recycle_profile_events();
    for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  DeviceInfo device() const override { return info_; }

  std::shared_ptr<Module> compile(const CompileRequest& request) override {
    return std::make_shared<CudaModule>(modules_.compile(request));
  }
  void precompile(const std::vector<CompileRequest>& requests) override { modules_.precompile(requests); }

  DeviceBuffer alloc(size_t bytes) override {
    void* p = nullptr;
    if (bytes) check(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    return DeviceBuffer(this, p, bytes);
  }
  void release(void* ptr) noexcept override { cudaFree(ptr); }
  void upload(void* dst, const void* src, size_t bytes) override {
    profiled(kCopyToDevice, 0, stream_, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpy host->device");
    });
    synchronize();
  }
  void download(void* dst, const void* src, size_t bytes) override {
    profiled(kCopyToHost, 0, stream_, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy device->host");
    });
    synchronize();
  }
  void download_async(void* dst, const void* src, size_t bytes) override {
    profiled(kCopyToHost, 0, current_, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_),
            "cudaMemcpyAsync device->host");
    });
  }
  HostBuffer alloc_host(size_t bytes) override {
    if (bytes == 0) return {};
    void* p = nullptr;
    // Portable: page-locked for every device's context, as --devices workers share the staging slots.
    check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
          "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
    return HostBuffer(p, bytes, [](void* ptr) noexcept { cudaFreeHost(ptr); });
  }
  void upload_async(void* dst, const void* src, size_t bytes) override {
    profiled(kCopyToDevice, 0, current_, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_),
            "cudaMemcpyAsync host->device");
    });
  }
  void fill_bytes(void* dst, uint8_t value, size_t bytes) override {
    profiled(kFill, 0, current_,
             [&] { check(cudaMemsetAsync(dst, value, bytes, current_), "cudaMemset" + after_last()); });
  }
  TensorMap tensor_map(const TensorMapDesc& desc) override { return cuda_tensor_map(desc); }

  void launch(const Kernel& kernel, const LaunchConfig& c, const KernelArgs& args) override {
    const auto* module = dynamic_cast<const CudaModule*>(kernel.module);
    if (!kernel.signature || module == nullptr)
      throw UsageError("kernel '" + kernel.name_expression + "' does not come from a cuda-backend module");
    check_launch_arguments(kernel.name_expression, *kernel.signature, args);
    const void* fn = kernel.handle;
    if (c.dynamic_shared_bytes > 48 * 1024)
      module->allow_dynamic_shared(fn, c.dynamic_shared_bytes, kernel.name_expression);
    dim3 grid(c.grid.x, c.grid.y, c.grid.z), block(c.block.x, c.block.y, c.block.z);
    last_kernel_ = kernel.name_expression;
    void** arguments = const_cast<void**>(args.pointers.data());
    profiled(kernel.name_expression, (unsigned long long)grid.x * grid.y * grid.z, current_, [&] {
      enqueue_launch(kernel, c, fn, grid, block, arguments);
    });
  }
  void enqueue_launch(const Kernel& kernel, const LaunchConfig& c, const void* fn, dim3 grid, dim3 block,
                      void** arguments) {
    if (c.programmatic_dependent && programmatic_) {
      // Captured into a graph, the attribute becomes a programmatic edge from the predecessor's kernel node.
      cudaLaunchAttribute overlap{};
      overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      overlap.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{grid, block, c.dynamic_shared_bytes, current_, &overlap, 1};
      check(cudaLaunchKernelExC(&config, fn, arguments), "launching kernel " + kernel.name_expression);
    } else {
      check(cudaLaunchKernel(fn, grid, block, arguments, c.dynamic_shared_bytes, current_),
            "launching kernel " + kernel.name_expression);
    }
    check(cudaGetLastError(), "launching kernel " + kernel.name_expression);
  }

  void start_launch_profile(LaunchProfileTiming timing) override {
    recycle_profile_events();
    profiling_ = true;
    profile_alone_ = timing == LaunchProfileTiming::Alone;
  }
  std::vector<LaunchSample> stop_launch_profile() override {
    profiling_ = false;
    std::vector<LaunchSample> samples;
    samples.reserve(profile_.size());
    for (const PendingLaunch& p : profile_) {
      check(cudaEventSynchronize(p.stop), "cudaEventSynchronize (launch profile)" + after_last());
      float ms = 0, start = 0;
      check(cudaEventElapsedTime(&ms, p.start, p.stop), "cudaEventElapsedTime (launch profile)");
      check(cudaEventElapsedTime(&start, profile_.front().start, p.start),
            "cudaEventElapsedTime (launch profile)");
      samples.push_back({p.kernel, p.blocks, ms, start, p.lane});
    }
    recycle_profile_events();
    return samples;
  }
  void synchronize() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize" + after_last());
  }

  double time_ms(const std::function<void()>& work) override {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    work();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize" + after_last());
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

  bool has_device_timing() const override { return true; }
  bool can_capture_graphs() const override { return true; }
  bool programmatic_launch() const override { return programmatic_; }
  bool runs_arch_specific_kernels() const override { return arch_specific_; }

  std::unique_ptr<LaunchGraph> capture(const std::function<void()>& work) override {
    if (profiling_) return Backend::capture(work);
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      work();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);
      if (partial) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture" + after_last());
    return std::make_unique<CudaLaunchGraph>(graph, stream_);
  }

  void fork_lane(int lane) override {
    if (lane < 1) throw RuntimeError("lane " + std::to_string(lane) + " cannot be forked");
    while (int(lanes_.size()) < lane) {
      Lane fresh;
      check(cudaStreamCreateWithFlags(&fresh.stream, cudaStreamNonBlocking), "cudaStreamCreate (lane)");
      check(cudaEventCreateWithFlags(&fresh.done, cudaEventDisableTiming), "cudaEventCreate (lane)");
      lanes_.push_back(fresh);
    }
    if (!fork_) check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate (fork)");
    check(cudaEventRecord(fork_, stream_), "cudaEventRecord (fork)");
    Lane& l = lanes_[size_t(lane - 1)];
    check(cudaStreamWaitEvent(l.stream, fork_, 0), "cudaStreamWaitEvent (fork)");
    l.open = true;
  }
  void use_lane(int lane) override {
    if (lane != 0 && (lane < 0 || lane > int(lanes_.size()) || !lanes_[size_t(lane - 1)].open))
      throw RuntimeError("lane " + std::to_string(lane) + " was not forked");
    current_ = lane == 0 ? stream_ : lanes_[size_t(lane - 1)].stream;
  }
  void join_lane(int lane) override {
    if (lane < 1 || lane > int(lanes_.size()) || !lanes_[size_t(lane - 1)].open) return;
    Lane& l = lanes_[size_t(lane - 1)];
    check(cudaEventRecord(l.done, l.stream), "cudaEventRecord (join)");
    check(cudaStreamWaitEvent(stream_, l.done, 0), "cudaStreamWaitEvent (join)");
    l.open = false;
    if (current_ == l.stream) current_ = stream_;
  }
  void join_lanes() override {
    for (int i = 1; i <= int(lanes_.size()); ++i) join_lane(i);
    current_ = stream_;
  }
  void wait_lane(int lane) override {
    if (lane < 0 || lane > int(lanes_.size()))
      throw RuntimeError("lane " + std::to_string(lane) + " was never forked");
    cudaStream_t s = lane == 0 ? stream_ : lanes_[size_t(lane - 1)].stream;
    check(cudaStreamSynchronize(s),
          "cudaStreamSynchronize (lane " + std::to_string(lane) + ")" + after_last());
  }

  void* native_stream() override { return current_; }
  void use_on_this_thread() override {
    const int ordinal = context_.options.device;
    check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
  }

  int occupancy_blocks_per_sm(const Kernel& k, int threads, size_t smem) override {
    int blocks = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.handle, threads, smem),
          "occupancy of " + k.name_expression);
    return blocks;
  }

 private:
  // Enqueues work on `stream`, between two events while the launch profile is on.
  template <class Enqueue>
  void profiled(const std::string& what, unsigned long long blocks, cudaStream_t stream, Enqueue&& enqueue) {
    if (!profiling_) return enqueue();
    int lane = 0;
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i].stream == stream) lane = int(i) + 1;
    if (profile_alone_)
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (launch profile)" + after_last());
    profile_.push_back({what, blocks, profile_event(), profile_event(), lane});
    check(cudaEventRecord(profile_.back().start, stream), "cudaEventRecord (launch profile)");
    enqueue();
    check(cudaEventRecord(profile_.back().stop, stream), "cudaEventRecord (launch profile)");
  }
  // An event for the launch profile: a spare one, else a new one.
  cudaEvent_t profile_event() {
    if (spare_events_.empty()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "cudaEventCreate (launch profile)");
      return e;
    }
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  void recycle_profile_events() noexcept {
    for (const PendingLaunch& p : profile_) spare_events_.insert(spare_events_.end(), {p.start, p.stop});
    profile_.clear();
  }

  std::string after_last() const {
    return last_kernel_.empty() ? "" : " (after kernel " + last_kernel_ + ")";
  }

  RuntimeContext context_;
  DeviceInfo info_;
  ModuleCompiler modules_;
  struct Lane {
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    bool open = false;  // forked and not joined since
  };
  cudaStream_t stream_ = nullptr;
  cudaStream_t current_ = nullptr;  // where launches go: stream_ or a forked lane
  std::vector<Lane> lanes_;
  cudaEvent_t fork_ = nullptr;
  bool programmatic_;  // Programmatic Dependent Launch: sm_90+ and not switched off
  bool arch_specific_;  // sm_90a code runs: a compute capability 9.0 device (cuda_compiler.cpp's rule)
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::string last_kernel_;
  struct PendingLaunch {  // a profiled launch, its events not yet read
    std::string kernel;
    unsigned long long blocks;
    cudaEvent_t start, stop;
    int lane;
  };
  bool profiling_ = false;
  bool profile_alone_ = false;  // LaunchProfileTiming::Alone
  std::vector<PendingLaunch> profile_;
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const RuntimeContext& context) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw UsageError("no CUDA device is available");
  }
  if (context.options.device < 0 || context.options.device >= count)
    throw UsageError("CUDA device " + std::to_string(context.options.device) +
                     " does not exist (this machine has " + std::to_string(count) + ")");
  return std::make_unique<CudaBackend>(context);
}

}  // namespace lab
