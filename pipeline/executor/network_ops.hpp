// The kernel ops of one network on one backend, made once at load: every Conv's
// weights uploaded to the device (at the network's precision), the nn kernels compiled once. Shape-dependent
// ops (PSA attention, decode, top-k) belong to a plan.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "backend.hpp"
#include "nn/conv2d_op.hpp"
#include "nn/nn_kernels.hpp"
#include "nn/plane_ops.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

class NetworkOps {
 public:
  NetworkOps(Backend& backend, const Yolo26Model& model, Precision precision);
  Backend& backend() const { return backend_; }
  NnKernels& kernels() { return *kernels_; }
  const Conv2dOp& conv(const ConvSpec& spec) const;   // by the spec's state-dict name
  const MaxPool2dOp& pool(int channels, int kernel);  // made on first use per (channels, kernel size)
  const UpsampleNearest2xOp& upsample() const { return *upsample_; }
  const CopyPlanesOp& copy() const { return *copy_; }

 private:
  void add(const ConvSpec& spec);
  Backend& backend_;
  Precision precision_;
  std::unique_ptr<NnKernels> kernels_;
  std::map<std::string, std::unique_ptr<Conv2dOp>> convs_;
  std::map<std::pair<int, int>, std::unique_ptr<MaxPool2dOp>> pools_;
  std::unique_ptr<UpsampleNearest2xOp> upsample_;
  std::unique_ptr<CopyPlanesOp> copy_;
};

}  // namespace lab
