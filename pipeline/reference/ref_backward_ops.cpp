// Reference backward ops. The convolution's input gradient is computed one input row of a block of input
// channels at a time: every output row that read the input row scatters dz * w into a float64 row
// accumulator laid out in `stride` phases like the forward's (padded column q = ox*stride + kx lives in phase
// q % stride, slot q / stride), so the inner loop over output columns is contiguous. The weight gradient is a
// dot product of each dz row with the phase-split input row, per block of output channels.
#include "pipeline/reference/ref_backward_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/reference/parallel_for.hpp"

namespace lab::reference {

namespace {

constexpr int kChannelBlock = 8;

// dz = dy * d act / d z.
RefGrad activation_backward(const ConvSpec& spec, const RefTensor& z, const RefGrad& dy) {
  RefGrad dz = dy;
  if (!spec.silu) return dz;
  for (size_t i = 0; i < dz.values.size(); ++i) {
    const double zi = z.values[i], sigmoid = 1.0 / (1.0 + std::exp(-zi));
    dz.values[i] *= sigmoid * (1.0 + zi * (1.0 - sigmoid));  // d/dz of z * sigmoid(z)
  }
  return dz;
}

struct ConvGeometry {
  int k, s, pad, in_per_group, out_per_group;
  size_t phase_length;  // slots per phase, enough for every padded column and every output's taps
  explicit ConvGeometry(const ConvSpec& spec, int width, int out_w)
      : k(spec.kernel),
        s(spec.stride),
        pad(spec.kernel / 2),
        in_per_group(spec.c_in / spec.groups),
        out_per_group(spec.c_out / spec.groups),
        phase_length(std::max<size_t>((size_t(width) + 2 * pad + s - 1) / s, size_t(out_w) + (k - 1) / s)) {}
};

void weight_gradient(const ConvSpec& spec, const ConvGeometry& g, const RefTensor& x, const RefGrad& dz,
                     ConvGradient& grad) {
  const int out_h = dz.height, out_w = dz.width;
  const int blocks_per_group = (g.out_per_group + kChannelBlock - 1) / kChannelBlock;
  const size_t taps = size_t(g.in_per_group) * g.k * g.k;
  parallel_for(size_t(spec.groups) * blocks_per_group, [&](size_t job) {
    const int group = int(job) / blocks_per_group;
    const int co0 = group * g.out_per_group + int(job) % blocks_per_group * kChannelBlock;
    const int channels = std::min(kChannelBlock, (group + 1) * g.out_per_group - co0);
    std::vector<double> acc(size_t(channels) * taps, 0.0), phases(g.phase_length * g.s, 0.0);
    for (int b = 0; b < x.batch; ++b)
      for (int ci = 0; ci < g.in_per_group; ++ci) {
        const float* in = x.channel(b, group * g.in_per_group + ci);
        for (int oy = 0; oy < out_h; ++oy)
          for (int ky = 0; ky < g.k; ++ky) {
            const int iy = oy * g.s + ky - g.pad;
            if (iy < 0 || iy >= x.height) continue;
            const float* src = in + size_t(iy) * x.width;
            for (int ix = 0; ix < x.width; ++ix) {
              const int q = ix + g.pad;
              phases[size_t(q % g.s) * g.phase_length + q / g.s] = src[ix];
            }
            for (int c = 0; c < channels; ++c) {
              const double* d = dz.channel(b, co0 + c) + size_t(oy) * out_w;
              double* w = acc.data() + size_t(c) * taps + (size_t(ci) * g.k + ky) * g.k;
              for (int kx = 0; kx < g.k; ++kx) {
                const double* r = phases.data() + size_t(kx % g.s) * g.phase_length + kx / g.s;
                double sum = 0;
                for (int ox = 0; ox < out_w; ++ox) sum += d[ox] * r[ox];
                w[kx] += sum;
              }
            }
          }
      }
    for (int c = 0; c < channels; ++c)
      for (size_t t = 0; t < taps; ++t) grad.weight[size_t(co0 + c) * taps + t] += acc[size_t(c) * taps + t];
  });
}

RefGrad input_gradient(const ConvSpec& spec, const ConvGeometry& g, const RefTensor& x, const RefGrad& dz) {
  const int out_h = dz.height, out_w = dz.width;
  const int blocks_per_group = (g.in_per_group + kChannelBlock - 1) / kChannelBlock;
  const int blocks = spec.groups * blocks_per_group;
  RefGrad dx(x.batch, x.channels, x.height, x.width);
  // One job = one input row of up to kChannelBlock input channels of one group of one image.
  parallel_for(size_t(x.batch) * blocks * x.height, [&](size_t job) {
    const int iy = int(job % x.height), block = int(job / x.height % blocks),
              b = int(job / x.height / blocks);
    const int group = block / blocks_per_group;
    const int ci0 = block % blocks_per_group * kChannelBlock;
    const int channels = std::min(kChannelBlock, g.in_per_group - ci0);
    thread_local std::vector<double> acc;
    const size_t row = g.phase_length * g.s;
    acc.assign(size_t(channels) * row, 0.0);
    for (int o = group * g.out_per_group; o < (group + 1) * g.out_per_group; ++o)
      for (int ky = 0; ky < g.k; ++ky) {
        const int shifted = iy + g.pad - ky;  // = oy * stride
        if (shifted < 0 || shifted % g.s != 0 || shifted / g.s >= out_h) continue;
        const double* d = dz.channel(b, o) + size_t(shifted / g.s) * out_w;
        for (int c = 0; c < channels; ++c) {
          const float* w = spec.weight.data() + ((size_t(o) * g.in_per_group + ci0 + c) * g.k + ky) * g.k;
          for (int kx = 0; kx < g.k; ++kx) {
            const double wv = w[kx];
            double* r = acc.data() + size_t(c) * row + size_t(kx % g.s) * g.phase_length + kx / g.s;
            for (int ox = 0; ox < out_w; ++ox) r[ox] += wv * d[ox];
          }
        }
      }
    for (int c = 0; c < channels; ++c) {
      double* dst = dx.channel(b, group * g.in_per_group + ci0 + c) + size_t(iy) * x.width;
      const double* a = acc.data() + size_t(c) * row;
      for (int ix = 0; ix < x.width; ++ix) {
        const int q = ix + g.pad;
        dst[ix] = a[size_t(q % g.s) * g.phase_length + q / g.s];
      }
    }
  });
  return dx;
}

}  // namespace

RefGrad zero_grad_like(const RefTensor& x) {
  return RefGrad(x.batch, x.channels, x.height, x.width);
}

RefGrad conv2d_backward(const ConvSpec& spec, const RefTensor& x, const RefTensor& z, const RefGrad& dy,
                        ConvGradients& grads, bool input_grad) {
  if (x.channels != spec.c_in || dy.channels != spec.c_out || z.values.size() != dy.values.size() ||
      dy.height != spec.out_size(x.height) || dy.width != spec.out_size(x.width))
    throw RuntimeError("reference conv backward " + spec.name + ": shapes do not match the layer");
  const RefGrad dz = activation_backward(spec, z, dy);
  ConvGradient& grad = grads[spec.name];
  grad.weight.resize(spec.weight.size(), 0.0);
  grad.bias.resize(size_t(spec.c_out), 0.0);
  for (int b = 0; b < dz.batch; ++b)
    for (int o = 0; o < spec.c_out; ++o) {
      const double* d = dz.channel(b, o);
      double sum = 0;
      for (size_t i = 0; i < dz.plane(); ++i) sum += d[i];
      grad.bias[size_t(o)] += sum;
    }
  const ConvGeometry geometry(spec, x.width, dz.width);
  weight_gradient(spec, geometry, x, dz, grad);
  return input_grad ? input_gradient(spec, geometry, x, dz) : RefGrad();
}

RefGrad maxpool_same_backward(const RefTensor& x, int kernel, const RefGrad& dy) {
  const int pad = kernel / 2;
  RefGrad dx = zero_grad_like(x);
  parallel_for(size_t(x.batch) * x.channels, [&](size_t plane) {
    const float* in = x.values.data() + plane * x.plane();
    const double* d = dy.values.data() + plane * x.plane();
    double* out = dx.values.data() + plane * x.plane();
    for (int oy = 0; oy < x.height; ++oy)
      for (int ox = 0; ox < x.width; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        size_t at = 0;
        for (int iy = std::max(0, oy - pad); iy <= std::min(x.height - 1, oy + pad); ++iy)
          for (int ix = std::max(0, ox - pad); ix <= std::min(x.width - 1, ox + pad); ++ix) {
            const size_t i = size_t(iy) * x.width + ix;
            if (in[i] > best) best = in[i], at = i;
          }
        out[at] += d[size_t(oy) * x.width + ox];
      }
  });
  return dx;
}

RefGrad upsample2x_backward(const RefGrad& dy) {
  RefGrad dx(dy.batch, dy.channels, dy.height / 2, dy.width / 2);
  for (size_t plane = 0; plane < size_t(dy.batch) * dy.channels; ++plane) {
    const double* in = dy.values.data() + plane * dy.plane();
    double* out = dx.values.data() + plane * dx.plane();
    for (int oy = 0; oy < dy.height; ++oy)
      for (int ox = 0; ox < dy.width; ++ox)
        out[size_t(oy / 2) * dx.width + ox / 2] += in[size_t(oy) * dy.width + ox];
  }
  return dx;
}

}  // namespace lab::reference
