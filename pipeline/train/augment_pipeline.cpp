// The per-image augmentation recipe: which steps run and what each one draws.
#include "pipeline/train/augment_pipeline.hpp"

#include "pipeline/train/augment_color.hpp"

namespace lab::train {
namespace {

constexpr int kTileRedraws = 8;

double uniform(dataset::SynthRandom& random, double low, double high) {
  return low + (high - low) * random.uniform();
}

AffineDraw draw_affine(const AugmentSettings& s, dataset::SynthRandom& random) {
  AffineDraw d;
  d.perspective_x = uniform(random, -s.perspective, s.perspective);
  d.perspective_y = uniform(random, -s.perspective, s.perspective);
  d.degrees = uniform(random, -s.degrees, s.degrees);
  d.scale = uniform(random, 1 - s.scale, 1 + s.scale);
  d.shear_x = uniform(random, -s.shear, s.shear);
  d.shear_y = uniform(random, -s.shear, s.shear);
  d.translate_x = uniform(random, 0.5 - s.translate, 0.5 + s.translate);
  d.translate_y = uniform(random, 0.5 - s.translate, 0.5 + s.translate);
  return d;
}

// Mosaic's three random tiles, each redrawn while it does not decode.
std::array<std::optional<LabeledImage>, 3> other_tiles(size_t count, const SampleSource& source,
                                                       dataset::SynthRandom& random) {
  std::array<std::optional<LabeledImage>, 3> tiles;
  for (std::optional<LabeledImage>& tile : tiles)
    for (int attempt = 0; attempt <= kTileRedraws && !tile; ++attempt)
      tile = source(size_t(random.next() % count));
  return tiles;
}

}  // namespace

std::optional<LabeledImage> augment_sample(size_t index, size_t count, const SampleSource& source,
                                           const AugmentSettings& settings, bool mosaic_allowed, int imgsz,
                                           dataset::SynthRandom& random) {
  std::optional<LabeledImage> first = source(index);
  if (!first) return std::nullopt;
  const bool mosaic = mosaic_allowed && settings.mosaic > 0 && random.uniform() < settings.mosaic;
  LabeledImage item;
  if (mosaic) {
    const std::array<std::optional<LabeledImage>, 3> others = other_tiles(count, source, random);
    std::array<const LabeledImage*, 4> tiles{&*first};
    for (size_t k = 0; k < 3; ++k) tiles[k + 1] = others[k] ? &*others[k] : &*first;
    const int border = (imgsz + 1) / 2;  // Ultralytics' -(-imgsz // 2)
    const int yc = int(uniform(random, border, 2 * imgsz - border));
    const int xc = int(uniform(random, border, 2 * imgsz - border));
    item = random_affine(mosaic4(tiles, imgsz, xc, yc), imgsz, draw_affine(settings, random));
  } else {
    item = random_affine(letterbox_square(*first, imgsz), imgsz, draw_affine(settings, random));
  }
  if (settings.hsv_h != 0 || settings.hsv_s != 0 || settings.hsv_v != 0)
    apply_hsv(item.image, {uniform(random, -settings.hsv_h, settings.hsv_h),
                           uniform(random, -settings.hsv_s, settings.hsv_s),
                           uniform(random, -settings.hsv_v, settings.hsv_v)});
  if (random.uniform() < settings.fliplr) flip_horizontal(item);
  return item;
}

}  // namespace lab::train
