// Conv2dStemNhwcOp: the network's first layer (3 -> C_out, 3x3 stride 2, padding 1, folded BN bias, optional
// SiLU) through conv2d_stem_nhwc.cu, a direct convolution in float FMAs that reads the network's float32 NCHW
// input [B, 3, H, W] (already scaled to [0, 1]) and writes NHWC activations (16-bit or float) [B, Ho, Wo,
// pitch] — so no padded 16-bit copy of the input is ever written or read. The float32 weights
// [C_out][3][3][3] and bias stay float32 (uploaded once at construction); the output is rounded once to fp16
// / bf16.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/activation_type.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_shape.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// Empty when conv2d_stem_nhwc runs the shape (C_in 3, K 3, stride 2, groups 1, C_out a multiple of 8 up to
// 64), else the rule it breaks (one line).
std::string conv2d_stem_nhwc_problem(const Conv2dShape& s);
// The request compiling the instance of a shape: conv2d_stem_nhwc<DT, C_OUT>.
CompileRequest conv2d_stem_nhwc_compile_request(ActivationType type, const Conv2dShape& s);

class Conv2dStemNhwcOp {
 public:
  // weight [c_out, 3, 3, 3], bias [c_out] (float32); throws UsageError on a shape conv2d_stem_nhwc_problem
  // refuses or wrong weight / bias sizes.
  Conv2dStemNhwcOp(Backend& backend, const Conv2dShape& shape, ActivationType type,
                   const std::vector<float>& weight, const std::vector<float>& bias);

  // out = act(conv(in) + bias); in: float32 NCHW [batch, 3, h, w], contiguous; out: NHWC [batch, ho, wo,
  // c_out] (ho = shape.out_size(h)) as NhwcView says (pitch a multiple of 8 of at least c_out, 16-byte
  // aligned: a channel slice of a wider buffer works). Throws UsageError on a bad view or size.
  void run(int batch, int h, int w, const float* in, NhwcView out) const;

  const Conv2dShape& shape() const { return shape_; }

 private:
  Backend& backend_;
  Conv2dShape shape_;
  std::shared_ptr<Module> module_;
  Kernel kernel_;
  DeviceBuffer weight_, bias_;
};

}  // namespace lab
