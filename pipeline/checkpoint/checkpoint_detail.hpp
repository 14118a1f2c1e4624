// Helpers the two checkpoint loaders (.pt, .safetensors) share: class-count inference from the head and
// default class names.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {

// The largest class count a checkpoint may declare (guards allocations driven by file contents).
constexpr int kMaxClasses = 100'000;

// nc from the classification head: the out-channels of the last conv of `model.<i>.[one2one_]cv3.0`
// (the Detect head, highest i); 0 when there is no such tensor.
int class_count_from_head(const std::map<std::string, HostTensor>& state_dict);

// "class0", "class1", ...
std::vector<std::string> default_class_names(int nc);

}  // namespace lab
