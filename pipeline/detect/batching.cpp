// The batching rule.
#include "pipeline/detect/batching.hpp"

namespace lab {

bool joins_batch(const LetterboxGeometry& first, size_t size, const LetterboxGeometry& next, int batch) {
  return size > 0 && size < size_t(batch > 0 ? batch : 1) && first.width == next.width &&
         first.height == next.height;
}

}  // namespace lab
