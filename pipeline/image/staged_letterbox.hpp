// A letterbox staged for the device: the source pixels and the resize taps of one image in one block of host
// memory (a staging slot), uploaded as it is and turned into the network input by letterbox_resize (the
// kernel network's forward_images). A host worker then copies the pixels instead of resizing and converting
// them; the device gives the same floats as letterbox_into_nchw (tests/test_letterbox_resize.cpp).
#pragma once
#include <cstddef>

#include "kernels/preprocess/letterbox_resize_params.cuh"
#include "pipeline/image/image.hpp"
#include "pipeline/image/letterbox.hpp"

namespace lab {

// The block's header, at its start; the offsets count bytes from the start and are 16-byte aligned.
struct StagedLetterbox {
  LetterboxGeometry geometry;
  size_t columns = 0, rows = 0;  // LetterboxTap [resized_width], [resized_height]
  size_t pixels = 0;             // RGB8 [source_height, source_width, 3]
  size_t bytes = 0;              // the whole block
};

// The header (the layout) of `geometry`'s block.
StagedLetterbox staged_letterbox_layout(const LetterboxGeometry& geometry);
// Writes `source`'s block at `block` (room for staged_letterbox_layout(geometry).bytes, 16-byte aligned).
const StagedLetterbox* stage_letterbox(const Image& source, const LetterboxGeometry& geometry, void* block);
// letterbox_resize's parameters for `staged`, whose copy lies at `device_block`, writing `out`
// ([3, geometry.height, geometry.width] floats).
LetterboxResizeParams letterbox_resize_params(const StagedLetterbox& staged, const unsigned char* device_block,
                                              float* out);

}  // namespace lab
