// The input gradient of a stride-1 conv on the forward conv's kernels: the transposed, flipped weights and
// the layout that maps the original weight order into them.
#include "pipeline/executor/input_grad_conv.hpp"

#include <cstdint>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

bool input_grad_runs_as_conv(const Conv2dShape& s) {
  return s.stride == 1 && s.kernel % 2 == 1 && (s.groups == 1 || s.depthwise());
}

namespace {

// The input gradient's conv shape: channels swapped, the same kernel and groups, no activation.
Conv2dShape transposed_shape(const Conv2dShape& s) {
  Conv2dShape t = s;
  t.c_in = s.c_out, t.c_out = s.c_in, t.silu = false;
  return t;
}

std::vector<float> transposed_flipped(const Conv2dShape& s, const std::vector<float>& weight) {
  const int taps = s.kernel * s.kernel, inputs = s.c_in / s.groups;
  std::vector<float> out(weight.size());
  for (int o = 0; o < s.c_out; ++o)
    for (int i = 0; i < inputs; ++i)
      for (int t = 0; t < taps; ++t) {
        const size_t from = (size_t(o) * inputs + i) * taps + t;
        // Depthwise: channel o's one filter stays channel o's; dense: row i of the transposed conv.
        const size_t to = s.groups == 1 ? (size_t(i) * s.c_out + o) * taps + (taps - 1 - t)
                                        : size_t(o) * taps + (taps - 1 - t);
        out[to] = weight[from];
      }
  return out;
}

}  // namespace

std::unique_ptr<Conv2dOp> make_input_grad_conv(NnKernels& kernels, const Conv2dShape& s,
                                               const std::vector<float>& weight, Precision precision) {
  if (!input_grad_runs_as_conv(s))
    throw RuntimeError("input gradient as a conv: needs stride 1, an odd kernel and groups 1 or depthwise");
  const Conv2dShape t = transposed_shape(s);
  return std::make_unique<Conv2dOp>(kernels, t, transposed_flipped(s, weight),
                                    std::vector<float>(size_t(t.c_out), 0.0f), precision);
}

ConvWeightLayout original_weight_layout(const Conv2dOp& input_grad_conv) {
  const ConvWeightLayout own = input_grad_conv.weight_layout();  // (o', i', t') of the transposed conv
  const Conv2dShape& t = input_grad_conv.shape();
  const long long last_tap = (long long)t.kernel * t.kernel - 1;
  const size_t element = own.half ? 2 : sizeof(float);
  ConvWeightLayout l = own;
  // Original (o, i, t) is (o' = i, i' = o, t' = last - t) when dense; depthwise (o' = o, i' = 0, t' = last - t).
  l.data = static_cast<uint8_t*>(own.data) + last_tap * own.tap_stride * (long long)element;
  l.tap_stride = -own.tap_stride;
  if (t.groups == 1)
    l.out_stride = own.in_stride, l.in_stride = own.out_stride;
  return l;
}

}  // namespace lab
