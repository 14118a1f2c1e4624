// Reference ops. The convolution computes one output row of a block of output channels at a time in a float64
// accumulator: for every input channel and kernel row it converts the input row to double once, zero padded
// at both ends and split into `stride` phases (padded column q goes to phase q % stride, slot q / stride), so
// the inner loop over output columns is branch-free and contiguous for every stride and kernel column.
#include "pipeline/reference/ref_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/reference/parallel_for.hpp"

namespace lab::reference {

namespace {

// Output channels computed together in one job (they share each converted input row).
constexpr int kChannelBlock = 8;

// The convolution with bias, then SiLU when `activate` (and spec.silu).
RefTensor convolve(const ConvSpec& spec, const RefTensor& x, bool activate) {
  if (x.channels != spec.c_in)
    throw RuntimeError("reference conv " + spec.name + ": input has " + std::to_string(x.channels) +
                       " channels, the layer reads " + std::to_string(spec.c_in));
  const int k = spec.kernel, s = spec.stride, pad = k / 2;
  const int out_h = spec.out_size(x.height), out_w = spec.out_size(x.width);
  const int in_per_group = spec.c_in / spec.groups, out_per_group = spec.c_out / spec.groups;
  const int blocks_per_group = (out_per_group + kChannelBlock - 1) / kChannelBlock;
  const int blocks = spec.groups * blocks_per_group;
  RefTensor y(x.batch, spec.c_out, out_h, out_w);
  // One job = one output row of up to kChannelBlock output channels of one group of one image.
  parallel_for(size_t(x.batch) * blocks * out_h, [&](size_t job) {
    const int oy = int(job % out_h), block = int(job / out_h % blocks), b = int(job / out_h / blocks);
    const int group = block / blocks_per_group;
    const int co0 = group * out_per_group + block % blocks_per_group * kChannelBlock;
    const int channels = std::min(kChannelBlock, (group + 1) * out_per_group - co0);
    thread_local std::vector<double> acc, phases;
    acc.resize(size_t(channels) * out_w);
    for (int c = 0; c < channels; ++c)
      std::fill_n(acc.data() + size_t(c) * out_w, out_w, double(spec.bias[co0 + c]));
    const size_t phase_length = (size_t(x.width) + 2 * pad + s - 1) / s;
    phases.assign(phase_length * s, 0.0);  // the padding slots are never written and stay zero
    for (int ci = 0; ci < in_per_group; ++ci) {
      const float* in = x.channel(b, group * in_per_group + ci);
      for (int ky = 0; ky < k; ++ky) {
        const int iy = oy * s + ky - pad;
        if (iy < 0 || iy >= x.height) continue;
        const float* src = in + size_t(iy) * x.width;
        size_t phase = size_t(pad % s), slot = size_t(pad / s);
        for (int ix = 0; ix < x.width; ++ix) {
          phases[phase * phase_length + slot] = src[ix];
          if (++phase == size_t(s)) phase = 0, ++slot;
        }
        for (int c = 0; c < channels; ++c) {
          const float* w = spec.weight.data() + ((size_t(co0 + c) * in_per_group + ci) * k + ky) * k;
          double* out = acc.data() + size_t(c) * out_w;
          for (int kx = 0; kx < k; ++kx) {
            const double wv = w[kx];
            const double* r = phases.data() + size_t(kx % s) * phase_length + kx / s;
            for (int ox = 0; ox < out_w; ++ox) out[ox] += wv * r[ox];
          }
        }
      }
    }
    for (int c = 0; c < channels; ++c) {
      const double* a = acc.data() + size_t(c) * out_w;
      float* dst = y.channel(b, co0 + c) + size_t(oy) * out_w;
      for (int ox = 0; ox < out_w; ++ox)
        dst[ox] = float(activate ? a[ox] / (1.0 + std::exp(-a[ox])) : a[ox]);
    }
  });
  return y;
}

template <class T>
BasicRefTensor<T> concat(const std::vector<const BasicRefTensor<T>*>& parts) {
  const BasicRefTensor<T>& first = *parts.front();
  int channels = 0;
  for (const BasicRefTensor<T>* p : parts) {
    if (p->batch != first.batch || p->height != first.height || p->width != first.width)
      throw RuntimeError("reference concat: parts differ in batch or spatial size");
    channels += p->channels;
  }
  BasicRefTensor<T> y(first.batch, channels, first.height, first.width);
  for (int b = 0; b < first.batch; ++b) {
    int c0 = 0;
    for (const BasicRefTensor<T>* p : parts) {
      std::copy_n(p->channel(b, 0), size_t(p->channels) * p->plane(), y.channel(b, c0));
      c0 += p->channels;
    }
  }
  return y;
}

template <class T>
BasicRefTensor<T> slice(const BasicRefTensor<T>& x, int begin, int count) {
  BasicRefTensor<T> y(x.batch, count, x.height, x.width);
  for (int b = 0; b < x.batch; ++b)
    std::copy_n(x.channel(b, begin), size_t(count) * x.plane(), y.channel(b, 0));
  return y;
}

template <class T>
void add_to(BasicRefTensor<T>& y, const BasicRefTensor<T>& x) {
  if (y.values.size() != x.values.size()) throw RuntimeError("reference add: shapes differ");
  for (size_t i = 0; i < y.values.size(); ++i) y.values[i] += x.values[i];
}

}  // namespace

RefTensor conv2d(const ConvSpec& spec, const RefTensor& x) {
  return convolve(spec, x, spec.silu);
}

RefTensor conv2d_linear(const ConvSpec& spec, const RefTensor& x) {
  return convolve(spec, x, false);
}

RefTensor maxpool_same(const RefTensor& x, int kernel) {
  const int pad = kernel / 2;
  RefTensor y(x.batch, x.channels, x.height, x.width);
  parallel_for(size_t(x.batch) * x.channels, [&](size_t plane) {
    const float* in = x.values.data() + plane * x.plane();
    float* out = y.values.data() + plane * y.plane();
    for (int oy = 0; oy < x.height; ++oy)
      for (int ox = 0; ox < x.width; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        for (int iy = std::max(0, oy - pad); iy <= std::min(x.height - 1, oy + pad); ++iy)
          for (int ix = std::max(0, ox - pad); ix <= std::min(x.width - 1, ox + pad); ++ix)
            best = std::max(best, in[size_t(iy) * x.width + ix]);
        out[size_t(oy) * x.width + ox] = best;
      }
  });
  return y;
}

RefTensor upsample2x(const RefTensor& x) {
  RefTensor y(x.batch, x.channels, x.height * 2, x.width * 2);
  for (size_t plane = 0; plane < size_t(x.batch) * x.channels; ++plane) {
    const float* in = x.values.data() + plane * x.plane();
    float* out = y.values.data() + plane * y.plane();
    for (int oy = 0; oy < y.height; ++oy)
      for (int ox = 0; ox < y.width; ++ox)
        out[size_t(oy) * y.width + ox] = in[size_t(oy / 2) * x.width + ox / 2];
  }
  return y;
}

RefTensor concat_channels(const std::vector<const RefTensor*>& parts) {
  return concat(parts);
}

RefGrad concat_grads(const std::vector<const RefGrad*>& parts) {
  return concat(parts);
}

RefTensor slice_channels(const RefTensor& x, int begin, int count) {
  return slice(x, begin, count);
}

RefGrad slice_grad(const RefGrad& x, int begin, int count) {
  return slice(x, begin, count);
}

void add_inplace(RefTensor& y, const RefTensor& x) {
  add_to(y, x);
}

void add_inplace(RefGrad& y, const RefGrad& x) {
  add_to(y, x);
}

}  // namespace lab::reference
