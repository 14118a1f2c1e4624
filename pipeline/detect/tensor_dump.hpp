// `lab detect --dump DIR`: every tensor of the network's last forward (the input, each layer's output, the
// head outputs, both attention maps, the detections), one safetensors file per image, keyed as the goldens
// are.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/network.hpp"

namespace lab {

// Writes DIR/<stem of files[b]>.safetensors (float32, batch dimension 1) for every image b of the last
// forward, each file atomically. UsageError naming the file when it cannot be written.
void dump_network_tensors(Network& network, const std::vector<std::string>& files,
                          const std::filesystem::path& dir);

}  // namespace lab
