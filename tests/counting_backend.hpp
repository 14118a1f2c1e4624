// CountingBackend: a Backend that forwards everything to another one and counts the device allocations, the
// host-to-device uploads, the compiles that missed the cache, the graph captures and the launches by kernel
// name, so a test can check how often an op copies data to the device, whether Backend::precompile covered
// every module compiled after it, when plans are captured and how many launches of a kernel a pass makes.
#pragma once
#include <map>
#include <string>

#include "nvrtc_runtime/backend.hpp"

namespace lab::test {

class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : inner_(inner) {}
  size_t allocations = 0;
  size_t uploads = 0;
  size_t compile_misses = 0;  // compile() calls that were not cache hits
  size_t captures = 0;
  std::map<std::string, size_t> launches;  // by Kernel::name_expression

  std::string name() const override { return inner_.name(); }
  DeviceInfo device() const override { return inner_.device(); }
  bool has_device_timing() const override { return inner_.has_device_timing(); }
  bool can_capture_graphs() const override { return inner_.can_capture_graphs(); }
  bool programmatic_launch() const override { return inner_.programmatic_launch(); }
  bool runs_arch_specific_kernels() const override { return inner_.runs_arch_specific_kernels(); }
  std::shared_ptr<Module> compile(const CompileRequest& request) override {
    std::shared_ptr<Module> module = inner_.compile(request);
    compile_misses += !module->result().cache_hit;
    return module;
  }
  DeviceBuffer alloc(size_t bytes) override {
    ++allocations;
    return inner_.alloc(bytes);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    ++uploads;
    inner_.upload(dst, src, bytes);
  }
  void upload_async(void* dst, const void* src, size_t bytes) override {
    ++uploads;
    inner_.upload_async(dst, src, bytes);
  }
  HostBuffer alloc_host(size_t bytes) override { return inner_.alloc_host(bytes); }
  void download(void* dst, const void* src, size_t bytes) override { inner_.download(dst, src, bytes); }
  void download_async(void* dst, const void* src, size_t bytes) override {
    inner_.download_async(dst, src, bytes);
  }
  void fill_bytes(void* dst, uint8_t value, size_t bytes) override { inner_.fill_bytes(dst, value, bytes); }
  TensorMap tensor_map(const TensorMapDesc& desc) override { return inner_.tensor_map(desc); }
  void launch(const Kernel& kernel, const LaunchConfig& config, const KernelArgs& args) override {
    ++launches[kernel.name_expression];
    inner_.launch(kernel, config, args);
  }
  void synchronize() override { inner_.synchronize(); }
  double time_ms(const std::function<void()>& work) override { return inner_.time_ms(work); }
  void release(void* ptr) noexcept override { inner_.release(ptr); }
  std::unique_ptr<LaunchGraph> capture(const std::function<void()>& work) override {
    ++captures;
    return inner_.capture(work);
  }
  void start_launch_profile(LaunchProfileTiming timing) override { inner_.start_launch_profile(timing); }
  std::vector<LaunchSample> stop_launch_profile() override { return inner_.stop_launch_profile(); }
  void fork_lane(int lane) override { inner_.fork_lane(lane); }
  void use_lane(int lane) override { inner_.use_lane(lane); }
  void join_lane(int lane) override { inner_.join_lane(lane); }
  void join_lanes() override { inner_.join_lanes(); }
  void wait_lane(int lane) override { inner_.wait_lane(lane); }
  void precompile(const std::vector<CompileRequest>& requests) override { inner_.precompile(requests); }

 private:
  Backend& inner_;
};

}  // namespace lab::test
