// A dataset with another class count than the checkpoint's: the class branches' last convs (cv3.i.2 and
// one2one_cv3.i.2, plain Conv2d c -> nc with bias) rebuilt with nc outputs, as Ultralytics does when it
// builds the model for the dataset and transfers only the checkpoint tensors whose shapes still match: the
// weight with PyTorch's default Conv2d init (kaiming_uniform_(a=sqrt(5)): uniform in +-1/sqrt(fan_in)), the
// bias with Detect.bias_init's class prior log(5 / nc / (640 / stride)^2). The model's nc and class names
// follow.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

// True when the names differ in count from the model's classes (the branches must be rebuilt).
bool needs_class_reinit(const Yolo26Model& model, const std::vector<std::string>& names);

// Sets the model's class names; rebuilds the class branches first when their count differs. The weights
// are drawn from `seed` (the same seed, the same weights).
void adopt_classes(Yolo26Model& model, const std::vector<std::string>& names, uint64_t seed);

}  // namespace lab::train
