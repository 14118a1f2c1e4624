// NhwcLayerOps: every YOLO26 layer of the NHWC network (16-bit or float activations) besides the dense
// convolutions (conv2d_nhwc_op.hpp) and attention, through kernels/nn/nhwc_layers.cu: the network input's
// packing, the depthwise 3x3 conv, the SPPF max pool, the nearest x2 upsample, a channel-slice copy and the
// detect head's conversion to float planes. One module per element type (fp16, bf16 or f32) holds every
// entry; the methods check their arguments (one-line UsageError naming the op) and launch once. NhwcDepthwise
// keeps one depthwise layer's weights on the device. Views as NhwcView says (conv2d_nhwc_op.hpp): pitch and
// slice offset multiples of 8, data 16-byte aligned; the channel counts need not be multiples of 8 (the tail
// of a pixel's last 8-channel group is read and written element by element, so the neighbours of a slice stay
// untouched).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/activation_type.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// The one compile of nhwc_layers.cu for an element type: every entry's name expression, in the order
// pack_input, depthwise3x3, maxpool, upsample2x, copy, to_planes.
CompileRequest nhwc_layers_compile_request(ActivationType type);

class NhwcLayerOps {
 public:
  NhwcLayerOps(Backend& backend, ActivationType type);

  // in float [batch, 3, h, w] (dense, the network input RGB / 255) -> out [batch, h, w] channels 0..2, and
  // channels 3..7 zero (the 8 channels a pitch-8 stem input holds).
  void pack_input(int batch, int h, int w, const float* in, NhwcView out) const;
  // max_pool2d(kernel, stride 1, padding kernel / 2 with -inf), kernel odd; in, out [batch, h, w] x channels.
  void maxpool(int batch, int h, int w, int channels, int kernel, NhwcView in, NhwcView out) const;
  // Nearest x2: in [batch, h_in, w_in] -> out [batch, 2 h_in, 2 w_in], `channels` channels.
  void upsample2x(int batch, int h_in, int w_in, int channels, NhwcView in, NhwcView out) const;
  // out = in over `pixels` pixels (batch * h * w) of `channels` channels.
  void copy(int64_t pixels, int channels, NhwcView in, NhwcView out) const;
  // in [batch, pixels] x channels -> float out[b * channels * anchors + c * anchors + first + p] for
  // p < pixels: one detect level's raw outputs into the [batch, channels, anchors] planes the float32 decode
  // and top-k kernels read (first + pixels <= anchors).
  void to_planes(int batch, int pixels, int channels, NhwcView in, float* out, int anchors, int first) const;

  Backend& backend() const { return backend_; }
  ActivationType type() const { return type_; }

 private:
  friend class NhwcDepthwise;
  // out = act(depthwise3x3(in) + bias) (+ residual when residual.data), the weights and bias on the device
  // as NhwcDepthwise lays them out (nhwc_layers_params.cuh).
  void depthwise3x3(int batch, int h, int w, int channels, const float* weight, const float* bias, bool silu,
                    NhwcView in, NhwcView out, NhwcView residual) const;

  Backend& backend_;
  ActivationType type_;
  std::shared_ptr<Module> module_;
  Kernel pack_input_, depthwise3x3_, maxpool_, upsample2x_, copy_, to_planes_;
};

// One depthwise 3x3 layer (YOLO26's DWConv, the PSA block's `pe`): stride 1, zero padding 1, + bias, optional
// SiLU, optional residual added after it. Its float32 weights [channels][9] (ConvSpec::weight of a groups =
// channels conv, BN folded, taps (ky, kx) row-major) and bias are uploaded once, tap-major and padded to a
// multiple of 8 channels (the kernel's layout); run() launches through `ops`, which must outlive it.
class NhwcDepthwise {
 public:
  // Throws UsageError on channels < 1 or weight / bias sizes other than channels * 9 / channels.
  NhwcDepthwise(const NhwcLayerOps& ops, int channels, const std::vector<float>& weight,
                const std::vector<float>& bias, bool silu);
  // in, out and residual [batch, h, w] x channels.
  void run(int batch, int h, int w, NhwcView in, NhwcView out, NhwcView residual = {}) const;
  int channels() const { return channels_; }

 private:
  const NhwcLayerOps& ops_;
  int channels_;
  bool silu_;
  DeviceBuffer weight_, bias_;
};

}  // namespace lab
