// Helpers the checkpoint loaders and writers (.pt, .safetensors) share: class-count inference from the head,
// default class names and a tensor's bytes in its stored dtype.
#pragma once
#include <cstdint>
#include <filesystem>
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

// The tensor's values as little-endian bytes of its stored dtype (F32, F16, BF16 or F64; F16 and BF16 round
// to nearest even). UsageError naming `path` and `key` for another dtype or values that do not fill the
// shape.
std::vector<uint8_t> stored_bytes(const HostTensor& tensor, const std::string& key,
                                  const std::filesystem::path& path);

}  // namespace lab
