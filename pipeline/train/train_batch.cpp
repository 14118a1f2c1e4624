// TrainBatch's float planes from its bytes, and the check of its image sizes.
#include "pipeline/train/train_engine.hpp"

#include <algorithm>

#include "pipeline/image/letterbox.hpp"

namespace lab::train {

std::vector<float> TrainBatch::planes() const {
  if (pixels.empty()) return images;
  const size_t plane = size_t(height) * size_t(width);
  std::vector<float> out(pixels.size());
  for (int b = 0; b < batch; ++b) {
    Image image(width, height);
    std::copy_n(pixels.begin() + long(size_t(b) * plane * 3), plane * 3, image.rgb.begin());
    write_nchw(image, out.data() + size_t(b) * plane * 3);
  }
  return out;
}

std::string TrainBatch::size_problem() const {
  const size_t values = size_t(batch) * 3 * size_t(height) * size_t(width);
  if (!pixels.empty() && !images.empty()) return "train batch: both bytes and float images are set";
  const size_t given = pixels.empty() ? images.size() : pixels.size();
  if (given == values) return "";
  return "train batch: " + std::to_string(given) + " image values for " + std::to_string(batch) +
         " images of " + std::to_string(height) + "x" + std::to_string(width);
}

}  // namespace lab::train
