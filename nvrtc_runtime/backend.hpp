// The interface both backends (cuda: NVRTC + CUDA runtime; cpu: host compiler + fiber emulator) implement.
// Runners, scenarios, the CLI and the viewer talk only to this.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/host_buffer.hpp"
#include "nvrtc_runtime/kernel_args.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {

class Backend;
class KernelTree;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  size_t dynamic_shared_bytes = 0;
  // Programmatic Dependent Launch: the kernel calls lab_grid_dependency_wait()
  // (common/lab_grid_dependency.cuh) before it reads or writes global memory that earlier launches touch, so
  // it may start while its stream predecessor still runs (the predecessor's lab_launch_dependents() or exit
  // lets it). Only an op whose kernels all wait sets this; a backend whose programmatic_launch() is false
  // launches it plainly.
  bool programmatic_dependent = false;
};

// An entry point of a compiled module; valid while its module lives.
struct Kernel {
  std::string name_expression;
  void* handle = nullptr;  // cudaKernel_t or the emulator's entry
  const class Module* module = nullptr;
  const EntrySignature* signature = nullptr;  // what every launch of it is checked against
};

class Module {
 public:
  virtual ~Module() = default;
  virtual const CompileResult& result() const = 0;
  // Throws UsageError when the name expression was not part of the compile request.
  virtual Kernel kernel(const std::string& name_expression) const = 0;
};

// RAII device allocation; on the cpu backend this is host memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, void* ptr, size_t bytes) : backend_(backend), ptr_(ptr), bytes_(bytes) {}
  // A view of memory someone else owns (a raw pointer an op was handed): frees nothing.
  static DeviceBuffer borrow(void* ptr, size_t bytes) { return DeviceBuffer(nullptr, ptr, bytes); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One launch's time while a launch profile is on (Backend::start_launch_profile). Copies and fills are
// samples too, named kCopyToDevice, kCopyToHost and kFill, with no blocks.
struct LaunchSample {
  std::string kernel;             // the entry's name expression, or one of the names below
  unsigned long long blocks = 0;  // grid size in CTAs (0: a copy or fill)
  double ms = 0;                  // from just before the launch to its end (see start_launch_profile)
  double start_ms = 0;            // when it started, from the profile's first sample's start
  int lane = 0;  // the lane it went to (Backend::use_lane; 0 on cpu, where lanes run in order)
};

// How a launch profile times each launch: as launched (beside whatever the other lanes run: the iteration's
// own schedule, each time lengthened by its neighbours) or alone (the device idle before each launch: the
// launch's own time; the work then runs one launch at a time).
enum class LaunchProfileTiming { AsLaunched, Alone };

inline const std::string kCopyToDevice = "(copy host->device)", kCopyToHost = "(copy device->host)",
                         kFill = "(memset)";

struct DeviceInfo {
  std::string name;         // "NVIDIA H200" or "host CPU (N threads)"
  std::string arch;         // "sm_90" or the host compiler
  int multiprocessors = 0;  // SMs, or host threads
  size_t shared_per_block_optin = 0;
};

// A recorded sequence of launches, replayed as a whole: a CUDA graph on `cuda` (one launch for the whole
// sequence), the recorded work run again on `cpu`. The buffers the work touched must outlive the graph.
class LaunchGraph {
 public:
  virtual ~LaunchGraph() = default;
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cuda" or "cpu": for display and the user's choice
  virtual DeviceInfo device() const = 0;

  // Capabilities, for callers that adapt to the backend (never compare names for this).
  // time_ms measures device time with events around asynchronous launches, so untimed warm-up launches and
  // many timed repetitions are cheap (cuda); false: each launch runs to completion on the host and the wall
  // clock times it (cpu).
  virtual bool has_device_timing() const = 0;
  // capture() records the launches as one graph replayed as a single launch (cuda); false: a replay runs the
  // recorded work again (cpu).
  virtual bool can_capture_graphs() const = 0;
  // Launches with LaunchConfig::programmatic_dependent overlap their stream predecessor's tail, also inside a
  // captured graph (cuda on sm_90 and later); cpu accepts the flag and runs launches one after another, so a
  // dependent's wait is met at once. False when RuntimeOptions::programmatic_launch is off (lab --no-pdl, for
  // A/B measurement): every launch is then a plain one.
  virtual bool programmatic_launch() const = 0;
  // Kernels compiled for the architecture-specific target (CompileRequest::arch_specific: wgmma, TMA,
  // setmaxnreg) run here: a compute capability 9.0 GPU (sm_90a code runs on no other), or the cpu emulator,
  // which models those instructions.
  virtual bool runs_arch_specific_kernels() const = 0;

  // Compiles (or loads from the cache) a source of the kernel tree. Throws CompileError on failure.
  virtual std::shared_ptr<Module> compile(const CompileRequest& request) = 0;
  // Compiles `requests` side by side into the compile cache without loading them (compile_in_parallel), so
  // each later compile() of one is a cache hit. The default compiles them one after another.
  virtual void precompile(const std::vector<CompileRequest>& requests) {
    for (const CompileRequest& r : requests) compile(r);
  }

  virtual DeviceBuffer alloc(size_t bytes) = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void fill_bytes(void* device_dst, uint8_t value, size_t bytes) = 0;
  // Host memory to stage transfers in (host_buffer.hpp): page-locked where copies are DMA (cuda); the default
  // is ordinary memory.
  virtual HostBuffer alloc_host(size_t bytes) { return HostBuffer::pageable(bytes); }
  // upload() that may return before the copy is done (cuda, from alloc_host memory), on the current lane: the
  // copy is ordered before the launches and transfers that follow there, and `host_src` must stay unchanged
  // until that lane's work is done (synchronize(), or a join and then synchronize()).
  virtual void upload_async(void* device_dst, const void* host_src, size_t bytes) {
    upload(device_dst, host_src, bytes);
  }
  // download() that may return before the copy is done (cuda, into alloc_host memory), on the current lane:
  // the copy runs after the work launched there so far, and `host_dst` holds the bytes once the host has
  // waited for that lane (wait_lane). The default copies at once (every launch before it has run).
  virtual void download_async(void* host_dst, const void* device_src, size_t bytes) {
    download(host_dst, device_src, bytes);
  }
  // The tensor map of `desc` in this backend's encoding (the driver's on cuda, the emulator's on cpu), for a
  // kernel's parameter struct. Throws UsageError naming the field a description gets wrong.
  virtual TensorMap tensor_map(const TensorMapDesc& desc) = 0;

  // Enqueue a launch; errors name the kernel. The cpu backend runs it to completion before returning.
  virtual void launch(const Kernel& kernel, const LaunchConfig& config, const KernelArgs& args) = 0;
  virtual void synchronize() = 0;

  // Device time of `work` in milliseconds (CUDA events on cuda, wall clock on cpu).
  virtual double time_ms(const std::function<void()>& work) = 0;

  // Occupancy (resident blocks per SM) of a kernel at a block size, where the backend knows it.
  virtual int occupancy_blocks_per_sm(const Kernel&, int /*block_threads*/, size_t /*dynamic_shared*/) {
    return 0;
  }

  virtual void release(void* ptr) noexcept = 0;

  // Records the launches `work` makes (on cuda they are captured, not run) for replay. The default keeps
  // the function and runs it on each replay; so does cuda while a launch profile is on.
  virtual std::unique_ptr<LaunchGraph> capture(const std::function<void()>& work);

  // Launch profile: from start_launch_profile() to stop_launch_profile(), every launch, copy and fill is
  // timed on its own (cuda: an event pair around it on its stream, so a launch the host issues late also
  // counts the GPU's wait for it, a few microseconds; cpu: the wall clock), and capture() makes replayed
  // functions rather than graphs, so the launches of later replays are timed too (graphs captured before the
  // start replay untimed). With LaunchProfileTiming::Alone the cuda backend waits for the device to be idle
  // before each launch, copy and fill (the cpu backend runs lanes in order, so both timings are alone there).
  // stop_launch_profile() waits for the device and returns the samples in launch order.
  virtual void start_launch_profile(LaunchProfileTiming timing) = 0;
  virtual std::vector<LaunchSample> stop_launch_profile() = 0;

  // Lanes: independent chains of launches that may run at the same time (on cuda, streams forked from the
  // main stream and joined back, which a graph capture records as parallel branches; elsewhere they run in
  // order). fork_lane(i), i >= 1: lane i's following launches start after everything launched so far on the
  // main stream (forking an open lane again adds that wait); fork_lanes(n): lanes 1..n-1 so; use_lane(i): the
  // following launches and fills go to lane i (0 = the main stream); join_lane(i): the main stream waits for
  // everything launched so far on lane i, which closes (and the main stream becomes current if lane i was);
  // join_lanes(): every open lane joined, the main stream current again; wait_lane(i): the host waits for
  // everything launched so far on lane i (0: the main stream), which stays open. upload() and download() stay
  // on the main stream (upload_async() and download_async() go to the current lane). Lanes in use:
  // GradientTape 1 (weight gradients) and 2 (its branch), the device loss 1 and 7 (its sums' copy to the
  // host, open until the backward is launched), the inference plans 1 .. 2 x levels (the head's),
  // DeviceTrainEngine 8 (the next batch's copy, open between iterations).
  virtual void fork_lane(int /*lane*/) {}
  void fork_lanes(int count) {
    for (int lane = 1; lane < count; ++lane) fork_lane(lane);
  }
  virtual void use_lane(int /*lane*/) {}
  virtual void join_lane(int /*lane*/) {}
  virtual void join_lanes() {}
  virtual void wait_lane(int /*lane*/) { synchronize(); }
  // The CUDA stream (cudaStream_t) the following launches go to, i.e. the current lane's, for a library that
  // enqueues its own work in order with the backend's (NCCL, pipeline/distributed); nullptr on backends
  // without CUDA streams.
  virtual void* native_stream() { return nullptr; }
  // Lets the calling thread drive this backend: on cuda it makes the backend's device current (CUDA's current
  // device is per thread, and the constructor sets it only on the constructing thread); nothing elsewhere. A
  // rank thread calls it first when the backend was made on another thread.
  virtual void use_on_this_thread() {}

  // Typed helpers.
  template <class T>
  DeviceBuffer alloc_array(size_t count) {
    return alloc(count * sizeof(T));
  }
  template <class T>
  DeviceBuffer upload_vector(const std::vector<T>& host) {
    DeviceBuffer b = alloc(host.size() * sizeof(T));
    upload(b.get(), host.data(), host.size() * sizeof(T));
    return b;
  }
  template <class T>
  std::vector<T> download_vector(const DeviceBuffer& b, size_t count) {
    std::vector<T> host(count);
    download(host.data(), b.get(), count * sizeof(T));
    return host;
  }
};

}  // namespace lab
