// One training image as `lab grad` takes it: the image letterboxed as `lab detect` does (imgsz x imgsz, or
// with `rect` the smallest rectangle of multiples of 32) into a [1, 3, H, W] network input, and its YOLO
// labels (normalised to the original image) mapped into that input through the same letterbox.
#pragma once
#include <filesystem>
#include <vector>

#include "pipeline/loss/labels.hpp"

namespace lab::loss {

struct TrainingImage {
  int height = 0, width = 0;        // the network input
  std::vector<float> input;         // [1, 3, height, width], RGB / 255
  Letterbox letterbox;              // original image -> input
  std::vector<GtBox> ground_truth;  // xyxy pixels in the input
};

// UsageError naming the file for an image that does not decode, a malformed labels file, or a label whose
// class is not one of the model's `num_classes` ("FILE:LINE: ...").
TrainingImage load_training_image(const std::filesystem::path& image, const std::filesystem::path& labels,
                                  int imgsz, bool rect, int num_classes);

}  // namespace lab::loss
