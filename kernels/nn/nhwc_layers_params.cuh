// The parameter structs of kernels/nn/nhwc_layers.cu (host and device): YOLO26's weightless and depthwise
// layers on NHWC activations (fp16, bf16 or float). A tensor (or a channel slice of a wider one) is a pointer
// to its channel 0 and a pitch: element (pixel, c) at data[pixel * pitch + c], pixel = (n * H + y) * W + x;
// the pitch and the slice's channel offset are multiples of 8, so each pixel's 8-channel groups are 16-byte
// aligned. Channel counts are any >= 1: a pixel's last group may be partial.
#pragma once

namespace lab {

struct NhwcSource {
  const void* data;  // the kernel's element type (nhwc_element.cuh): 16-bit or float
  int pitch;
};

struct NhwcTarget {
  void* data;
  int pitch;
};

struct NhwcPackInputParams {
  const float* in;  // [batch, 3, plane] dense: the network input's R, G, B planes
  NhwcTarget out;   // [batch * plane] x 8 channels: R, G, B, then 5 zeros
  int batch;
  int plane;  // H * W
};

struct NhwcDepthwiseParams {
  NhwcSource in;        // [batch, h, w] x channels
  NhwcSource residual;  // data null, or of the output's shape: added after the activation
  NhwcTarget out;       // [batch, h, w] x channels
  const float* weight;  // [9][groups * 8], taps (ky, kx) row-major, groups = ceil(channels / 8): a tap's
                        // weights of every channel side by side (two 16-byte loads a group), zeros past C
  const float* bias;    // [groups * 8], zeros past C
  int batch, h, w, channels;
  int silu;  // 1: SiLU after the bias
};

struct NhwcMaxPoolParams {
  NhwcSource in;  // [batch, h, w] x channels
  NhwcTarget out;
  int batch, h, w, channels;
  int kernel;  // odd; stride 1, padding kernel / 2 with -inf
};

struct NhwcUpsampleParams {
  NhwcSource in;   // [batch, h_in, w_in] x channels
  NhwcTarget out;  // [batch, 2 h_in, 2 w_in] x channels
  int batch, h_in, w_in, channels;
};

struct NhwcCopyParams {
  NhwcSource in;
  NhwcTarget out;
  long long pixels;  // batch * h * w
  int channels;
};

struct NhwcToPlanesParams {
  NhwcSource in;  // [batch, pixels] x channels
  float* out;     // [batch, channels, anchors]: (b, c, first + p) at (b * channels + c) * anchors + first + p
  int batch, pixels, channels;
  int anchors, first;  // first + pixels <= anchors
};

}  // namespace lab
