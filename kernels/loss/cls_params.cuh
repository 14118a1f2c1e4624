// Parameters of the classification BCE kernels (cls.cu), shared by the kernels and the host that launches
// them: plain data, passed by value. Logits and targets are [C, N] row-major (class-major).
#pragma once

namespace lab {

struct ClsForwardParams {
  const float* logits;   // [C, N]
  const float* targets;  // [C, N], soft targets in [0, 1]
  float* loss;           // [N]: summed over classes
  int c;                 // C
  int n;                 // N
};

struct ClsBackwardParams {
  const float* logits;   // [C, N]
  const float* targets;  // [C, N]
  const float* dy;       // [N]: upstream gradient of each anchor's loss
  float* d_logits;       // [C, N]
  int c;                 // C
  int n;                 // N
};

}  // namespace lab
