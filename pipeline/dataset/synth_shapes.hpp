// The drawing of `lab data synth`: shapes (the classes) filled with a colour, anti-aliased by 4x4
// supersampling, and textured backgrounds (noise, gradients, stripes). Each shape fills its box exactly: its
// outline touches all four sides, so the box drawn is the shape's full extent.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/image/image.hpp"

namespace lab::dataset {

// The shapes in class order: circle, square, triangle, star, hexagon, cross, diamond, ring.
const std::vector<std::string>& shape_names();

struct ShapeBox {
  int x = 0, y = 0, w = 0, h = 0;  // pixels; the shape spans [x, x + w) x [y, y + h)
};

// Fills shape `shape` (an index into shape_names) stretched over `box` with `colour`, blending its edges.
void draw_shape(Image& image, int shape, const ShapeBox& box, const std::array<uint8_t, 3>& colour);

// A deterministic stream of uniform numbers (SplitMix64), so a seed gives the same images everywhere.
class SynthRandom {
 public:
  explicit SynthRandom(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                // [0, 1)
  int integer(int low, int high);  // [low, high]
  std::array<uint8_t, 3> colour();

 private:
  uint64_t state_;
};

// Fills the image with one of the textures, its colours and scale drawn from `random`.
void draw_background(Image& image, SynthRandom& random);

}  // namespace lab::dataset
