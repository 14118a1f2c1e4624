// Raw head outputs in a safetensors file, in the layout of goldens/bus_loss_golden.safetensors:
// "one2many.boxes" [B, 4, A], "one2many.scores" [B, nc, A], "one2one.boxes", "one2one.scores", and optionally
// the gradients "<key>.grad" of the same shapes.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "pipeline/loss/loss_types.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::loss {

// A batch with both heads filled from the file and the anchor grid of an image_height x image_width input
// (ground truth left empty, one list per image). Throws UsageError naming the file for a missing key or
// inconsistent shapes, and when the anchor count does not match the input size.
LossBatch load_head_outputs(const SafetensorsFile& file, int image_height, int image_width);

// rel L2 of each gradient of `result` against the file's "<key>.grad" tensors that exist.
std::map<std::string, double> compare_stored_gradients(const SafetensorsFile& file, const LossResult& result);

// Writes the gradients of the total as "<key>.grad" F32 tensors (the keys of the input file).
void write_gradients(const std::filesystem::path& path, const LossBatch& batch, const LossResult& result);

}  // namespace lab::loss
