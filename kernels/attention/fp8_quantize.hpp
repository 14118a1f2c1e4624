// Per-tensor e4m3 quantisation of float data (the fp8 attention runner's inputs): scale = max |x| / 448, each
// value rounded to the e4m3 code of x / scale as cvt.rn.satfinite does (lab_emu_e4m3.hpp, the emulator's
// model of it), and the values the codes stand for.
#pragma once
#include <cstdint>
#include <vector>

namespace lab {

struct E4m3Tensor {
  std::vector<uint8_t> codes;
  float scale = 1;
  std::vector<double> values;  // code value * scale: what a kernel reading the codes computes with
};

E4m3Tensor quantize_e4m3(const std::vector<float>& x);

}  // namespace lab
