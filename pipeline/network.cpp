// The Network interface's default forward over separate letterboxed images: assemble the batch, then forward().
#include "pipeline/network.hpp"

#include <algorithm>
#include <chrono>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

double Network::forward_images(const std::vector<ImageInput>& images, int height, int width) {
  const auto start = std::chrono::steady_clock::now();
  const size_t per_image = size_t(3) * size_t(height) * size_t(width);
  std::vector<float> batch(per_image * images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    if (!images[i].nchw)
      throw UsageError("the " + executor_name() + " executor takes letterboxed images, not staged letterboxes");
    std::copy_n(images[i].nchw, per_image, batch.data() + i * per_image);
  }
  const double assembly_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  forward(batch.data(), int(images.size()), height, width);
  return assembly_ms;
}

}  // namespace lab
