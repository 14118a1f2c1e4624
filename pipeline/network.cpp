// The Network interface's default forward over separate images: assemble the batch, then forward().
#include "pipeline/network.hpp"

#include <algorithm>
#include <chrono>

namespace lab {

double Network::forward_images(const std::vector<const float*>& images, int height, int width) {
  const auto start = std::chrono::steady_clock::now();
  const size_t per_image = size_t(3) * size_t(height) * size_t(width);
  std::vector<float> batch(per_image * images.size());
  for (size_t i = 0; i < images.size(); ++i) std::copy_n(images[i], per_image, batch.data() + i * per_image);
  const double assembly_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  forward(batch.data(), int(images.size()), height, width);
  return assembly_ms;
}

}  // namespace lab
