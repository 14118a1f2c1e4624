// Batching rule of `lab detect --batch N`: consecutive images share one forward while their letterboxed
// shapes are equal and the batch holds fewer than N (rect mode shapes follow the aspect ratio; square mode
// always fits).
#pragma once
#include <cstddef>

#include "pipeline/image/letterbox.hpp"

namespace lab {

// Whether an image of letterbox `next` can join a batch of `size` images of letterbox `first` (size > 0).
bool joins_batch(const LetterboxGeometry& first, size_t size, const LetterboxGeometry& next, int batch);

}  // namespace lab
