// A random-weight YOLO26 checkpoint for any scale, written in the tests from spec/yolo26.md's formulas
// (yolo26.yaml, the width/depth rules and the module definitions), independently of the model builder.
#pragma once
#include <string>
#include <vector>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::test {

struct SyntheticModelOptions {
  std::string scale = "s";  // n, s, m, l, x
  int nc = 3;
  bool one2many_head = false;  // also write the cv2/cv3 (one-to-many) branches
  uint64_t seed = 1;
};

// The checkpoint (names "class0".., nc set, scale left empty so the builder must derive it).
Checkpoint synthetic_checkpoint(const SyntheticModelOptions& options);

// The training tests' network: the synthetic yolo26n with 3 classes and both heads, built.
Yolo26Model synthetic_trainable_yolo26n();

// The output channels of layers 0..22 for the scale, from the spec's channel formula.
std::vector<int> spec_layer_channels(const std::string& scale);

}  // namespace lab::test
