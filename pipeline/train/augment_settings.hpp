// The training augmentation's settings, with Ultralytics' default.yaml values (docs/training-data.md,
// "The training batch loader and its augmentation"). degrees, shear and perspective are 0 there too; they are
// supported for completeness.
#pragma once

namespace lab::train {

struct AugmentSettings {
  double hsv_h = 0.015, hsv_s = 0.7, hsv_v = 0.4;  // HSV gains: each drawn in [-g, g]
  double translate = 0.1, scale = 0.5;             // random affine: +-translate of the size, gain 1 +- scale
  double degrees = 0, shear = 0, perspective = 0;  // random affine: rotation, shear (degrees), perspective
  double fliplr = 0.5;                             // probability of a horizontal flip
  double mosaic = 1.0;                             // probability of a 4-image mosaic
  int close_mosaic = 10;                           // the last N epochs without mosaic

  // No augmentation at all: every image only letterboxed (validation-like batches).
  static AugmentSettings none() {
    AugmentSettings s;
    s.hsv_h = s.hsv_s = s.hsv_v = s.translate = s.scale = s.degrees = s.shear = s.perspective = 0;
    s.fliplr = s.mosaic = 0;
    s.close_mosaic = 0;
    return s;
  }
};

// UsageError "--scale 1.5: must be in [0, 1]" for the first setting out of range: the gains, translate,
// scale, perspective and the probabilities in [0, 1] (Ultralytics' fraction keys), degrees and shear in
// [-180, 180], close_mosaic >= 0.
void check_augment_settings(const AugmentSettings& settings);

}  // namespace lab::train
