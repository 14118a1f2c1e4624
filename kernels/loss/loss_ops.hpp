// The loss kernels as ops on device buffers, for the runners and for Yolo26Loss: each op compiles its module
// once (Backend::compile, which also hits the disk cache) and then only launches.
#pragma once
#include <memory>
#include <string>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kCiouSource = "loss/ciou.cu";
inline constexpr const char* kClsSource = "loss/cls.cu";

// Name expressions and compile requests (one module holds an op's forward and backward kernels).
std::string ciou_forward_name(int block_n);
std::string ciou_backward_name(int block_n, bool full_alpha_grad);
CompileRequest ciou_compile_request(int block_n, bool full_alpha_grad);
std::string cls_forward_name(int block_n);
std::string cls_backward_name(int block_n);
CompileRequest cls_compile_request(int block_n);

struct CiouSaved {
  DeviceBuffer loss, iou, v, alpha;  // each [N] float
};

// CIoU box loss: pred, target [4, N] XYWH -> loss [N] and the saved iou, v, alpha; backward -> d_pred [4, N].
// full_alpha_grad selects the derivative through alpha (default: alpha constant, as in Ultralytics).
// block_n: anchors per CTA, a power of two in [32, 1024] (UsageError otherwise).
class CiouOp {
 public:
  explicit CiouOp(Backend& backend, bool full_alpha_grad = false, int block_n = 128);
  CiouSaved forward(const DeviceBuffer& pred, const DeviceBuffer& target, int n) const;
  DeviceBuffer backward(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                        const DeviceBuffer& dy, int n) const;
  // The same launches into caller-owned buffers (no allocation; for repeated runs and benchmarks).
  void forward_into(const DeviceBuffer& pred, const DeviceBuffer& target, int n, const CiouSaved& out) const;
  void backward_into(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                     const DeviceBuffer& dy, int n, const DeviceBuffer& d_pred) const;
  const Module& module() const { return *module_; }

 private:
  Backend& backend_;
  int block_n_;
  std::shared_ptr<Module> module_;
  Kernel forward_, backward_;
};

// Classification BCE with logits: logits, targets [C, N] -> loss [N] (summed over classes);
// backward -> d_logits [C, N] = dy[n] * (sigmoid(x) - t). block_n as for CiouOp; C <= 65535.
class ClsBceOp {
 public:
  explicit ClsBceOp(Backend& backend, int block_n = 128);
  DeviceBuffer forward(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n) const;
  DeviceBuffer backward(const DeviceBuffer& logits, const DeviceBuffer& targets, const DeviceBuffer& dy,
                        int c, int n) const;
  void forward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n,
                    const DeviceBuffer& loss) const;
  void backward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, const DeviceBuffer& dy, int c,
                     int n, const DeviceBuffer& d_logits) const;
  const Module& module() const { return *module_; }

 private:
  Backend& backend_;
  int block_n_;
  std::shared_ptr<Module> module_;
  Kernel forward_, backward_;
};

}  // namespace lab
