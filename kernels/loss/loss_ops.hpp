// The loss kernels (ciou.cu, cls.cu): their specs, from which the runners are made, and their ops on device
// buffers, for the runners and for Yolo26Loss. Each op compiles its module (forward and backward kernels)
// once from its spec (Backend::compile, which also hits the disk cache) and then only launches.
#pragma once
#include <memory>
#include <string>

#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

const KernelSpec& ciou_fwd_spec();
const KernelSpec& ciou_bwd_spec();
const KernelSpec& cls_fwd_spec();
const KernelSpec& cls_bwd_spec();

// What both ops hold: the backend, and the forward and backward entries (in that order) of the module
// compiled from a spec's variant at BLOCK_N = block_n, after checking block_n (UsageError naming `op`).
class LossOpModule {
 protected:
  LossOpModule(Backend& backend, const char* op, const KernelSpec& spec, const std::string& variant,
               int block_n);
  Backend& backend_;
  int block_n_;
  std::shared_ptr<Module> module_;
  Kernel forward_, backward_;
};

struct CiouSaved {
  DeviceBuffer loss, iou, v, alpha;  // each [N] float
};

// CIoU box loss: pred, target [4, N] XYWH -> loss [N] and the saved iou, v, alpha; backward -> d_pred [4, N].
// full_alpha_grad selects the derivative through alpha (default: alpha constant, as in Ultralytics).
// block_n: anchors per CTA, a power of two in [32, 1024] (UsageError otherwise).
class CiouOp : LossOpModule {
 public:
  explicit CiouOp(Backend& backend, bool full_alpha_grad = false, int block_n = 128);
  CiouSaved forward(const DeviceBuffer& pred, const DeviceBuffer& target, int n) const;
  DeviceBuffer backward(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                        const DeviceBuffer& dy, int n) const;
  // The same launches into caller-owned buffers (no allocation; for repeated runs and benchmarks).
  void forward_into(const DeviceBuffer& pred, const DeviceBuffer& target, int n, const CiouSaved& out) const;
  void backward_into(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                     const DeviceBuffer& dy, int n, const DeviceBuffer& d_pred) const;
};

// Classification BCE with logits: logits, targets [C, N] -> loss [N] (summed over classes);
// backward -> d_logits [C, N] = dy[n] * (sigmoid(x) - t). block_n as for CiouOp; C <= 65535.
class ClsBceOp : LossOpModule {
 public:
  explicit ClsBceOp(Backend& backend, int block_n = 128);
  DeviceBuffer forward(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n) const;
  DeviceBuffer backward(const DeviceBuffer& logits, const DeviceBuffer& targets, const DeviceBuffer& dy,
                        int c, int n) const;
  void forward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n,
                    const DeviceBuffer& loss) const;
  void backward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, const DeviceBuffer& dy, int c,
                     int n, const DeviceBuffer& d_logits) const;
};

}  // namespace lab
