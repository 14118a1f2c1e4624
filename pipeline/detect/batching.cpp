// The batching rule, and the batch shapes it forms over a list of image sizes.
#include "pipeline/detect/batching.hpp"

#include <set>

namespace lab {

bool joins_batch(const LetterboxGeometry& first, size_t size, const LetterboxGeometry& next, int batch) {
  return size > 0 && size < size_t(batch > 0 ? batch : 1) && first.width == next.width &&
         first.height == next.height;
}

std::vector<BatchShape> batch_shapes(const std::vector<std::optional<ImageSize>>& sizes, int imgsz, bool rect,
                                     int batch) {
  std::set<BatchShape> shapes;
  LetterboxGeometry first;
  size_t pending = 0;
  for (const std::optional<ImageSize>& size : sizes) {
    if (!size) continue;
    const LetterboxGeometry g = letterbox_geometry(size->width, size->height, imgsz, rect);
    if (pending > 0 && !joins_batch(first, pending, g, batch)) {
      shapes.insert({int(pending), first.height, first.width});
      pending = 0;
    }
    if (pending == 0) first = g;
    ++pending;
  }
  if (pending > 0) shapes.insert({int(pending), first.height, first.width});
  return {shapes.begin(), shapes.end()};
}

}  // namespace lab
