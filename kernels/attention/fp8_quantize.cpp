// quantize_e4m3: per-tensor scale, codes by the hardware's rounding (nvrtc_runtime/cpu/device/lab_emu_e4m3.hpp).
#include "kernels/attention/fp8_quantize.hpp"

#include <algorithm>
#include <cmath>

#include "nvrtc_runtime/cpu/device/lab_emu_e4m3.hpp"

namespace lab {

E4m3Tensor quantize_e4m3(const std::vector<float>& x) {
  constexpr float kLargest = 448.0f;
  float largest = 0;
  for (float v : x) largest = std::max(largest, std::fabs(v));
  E4m3Tensor t;
  t.scale = largest > 0 ? largest / kLargest : 1.0f;
  t.codes.resize(x.size());
  t.values.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    t.codes[i] = lab_emu::e4m3_from_float(x[i] / t.scale);
    t.values[i] = double(lab_emu::e4m3_to_float(t.codes[i])) * t.scale;
  }
  return t;
}

}  // namespace lab
