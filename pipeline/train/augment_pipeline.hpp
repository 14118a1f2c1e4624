// One training image as Ultralytics' v8_transforms make it, in their order: Mosaic (with probability
// `mosaic`; else load_image + LetterBox), RandomPerspective, RandomHSV, RandomFlip (horizontal). The random
// values come from one stream per image (seeded by the loader from its seed, the epoch and the image's
// place), so an image comes out the same whichever thread prepares it.
#pragma once
#include <functional>
#include <optional>

#include "pipeline/dataset/synth_shapes.hpp"
#include "pipeline/train/augment_geometry.hpp"
#include "pipeline/train/augment_settings.hpp"

namespace lab::train {

// Sample `index` decoded and resized by load_resized; nullopt when its image does not decode.
using SampleSource = std::function<std::optional<LabeledImage>(size_t index)>;

// The imgsz x imgsz training image of sample `index` (of `count`); `mosaic_allowed` is false in the
// close_mosaic epochs. The three other mosaic tiles are random samples; one that does not decode is drawn
// again (up to 8 times, then the first tile is used again). nullopt when sample `index` does not decode.
std::optional<LabeledImage> augment_sample(size_t index, size_t count, const SampleSource& source,
                                           const AugmentSettings& settings, bool mosaic_allowed, int imgsz,
                                           dataset::SynthRandom& random);

}  // namespace lab::train
