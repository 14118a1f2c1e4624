// Batching rule of `lab detect --batch N`: consecutive images share one forward while their letterboxed
// shapes are equal and the batch holds fewer than N (rect mode shapes follow the aspect ratio; square mode
// always fits).
#pragma once
#include <cstddef>
#include <optional>
#include <tuple>
#include <vector>

#include "pipeline/image/image.hpp"
#include "pipeline/image/letterbox.hpp"

namespace lab {

// Whether an image of letterbox `next` can join a batch of `size` images of letterbox `first` (size > 0).
bool joins_batch(const LetterboxGeometry& first, size_t size, const LetterboxGeometry& next, int batch);

// A batch size and letterboxed shape a forward runs at.
struct BatchShape {
  int batch = 1, height = 0, width = 0;
  bool operator<(const BatchShape& o) const {
    return std::tie(batch, height, width) < std::tie(o.batch, o.height, o.width);
  }
  bool operator==(const BatchShape& o) const = default;
};

// The distinct batch shapes the rule above forms over images of these sizes in file order (nullopt: a file
// that will be skipped, which does not break a batch), letterboxed at `imgsz` (`rect` as DetectorOptions),
// sorted.
std::vector<BatchShape> batch_shapes(const std::vector<std::optional<ImageSize>>& sizes, int imgsz, bool rect,
                                     int batch);

}  // namespace lab
