// The geometric steps of Ultralytics' training augmentation (v8_transforms), on RGB8 images with xyxy pixel
// boxes: load_image's resize, LetterBox, the 4-image Mosaic, RandomPerspective (the random affine) with its
// box_candidates filter, and the horizontal flip. The random values are drawn by the caller
// (augment_pipeline), so each step here is a plain function of its arguments.
#pragma once
#include <array>
#include <vector>

#include "pipeline/image/image.hpp"
#include "pipeline/loss/labels.hpp"

namespace lab::train {

struct LabeledImage {
  Image image;
  std::vector<loss::GtBox> boxes;  // class and xyxy pixels in `image`
};

constexpr uint8_t kAugmentPad = 114;  // the grey of letterbox padding, mosaic canvas and affine borders

// Ultralytics load_image in training: the long side resized to imgsz (each side ceil(side * imgsz / long
// side), at most imgsz; bilinear as OpenCV's INTER_LINEAR; unchanged when already that size), the labels
// denormalised to the result.
LabeledImage load_resized(const Image& decoded, const std::vector<loss::YoloLabel>& labels, int imgsz);

// LetterBox(new_shape=(imgsz, imgsz)): resized to fit when larger, then centred on an imgsz x imgsz canvas
// of 114; the boxes moved with it.
LabeledImage letterbox_square(const LabeledImage& in, int imgsz);

// Mosaic: tiles 0..3 placed top-left, top-right, bottom-left, bottom-right of the centre (xc, yc) of a
// 2*imgsz x 2*imgsz canvas of 114, each cut where it leaves the canvas; the boxes moved with their tile,
// clipped to the canvas, and those left without area removed.
LabeledImage mosaic4(const std::array<const LabeledImage*, 4>& tiles, int imgsz, int xc, int yc);

// The drawn values of one RandomPerspective.
struct AffineDraw {
  double perspective_x = 0, perspective_y = 0;  // P[2][0], P[2][1]
  double degrees = 0;                           // rotation, counter-clockwise as cv2.getRotationMatrix2D
  double scale = 1;                             // gain
  double shear_x = 0, shear_y = 0;              // degrees
  double translate_x = 0.5, translate_y = 0.5;  // the centre's place, as a fraction of the output size
};

// Row-major 3x3: M = T * S * R * P * C (C moves the input's centre to the origin).
using Matrix3 = std::array<double, 9>;
Matrix3 affine_matrix(int input_width, int input_height, int output_size, const AffineDraw& draw);

// cv2.warpAffine / warpPerspective(INTER_LINEAR, borderValue 114): every output pixel (x, y) samples the
// input bilinearly at M^-1 (x, y) (pixel centres at integer coordinates), in float64, rounded half up.
Image warp_image(const Image& in, const Matrix3& m, int output_size);

// The box around the four transformed corners (divided by w under perspective), not clipped.
loss::GtBox transform_box(const loss::GtBox& box, const Matrix3& m);

// Ultralytics box_candidates: `after` (the transformed, clipped box) is kept when it is wider and taller than
// 2 px, keeps more than 10 % of the area of `before` (the box before the transform times the scale gain) and
// its aspect ratio (either way) is below 100.
bool box_candidate(const loss::GtBox& before, const loss::GtBox& after);

// RandomPerspective: the image warped to output_size x output_size (not warped when M is the identity and
// the input already has that size), boxes transformed, clipped to the output and filtered by box_candidate.
LabeledImage random_affine(const LabeledImage& in, int output_size, const AffineDraw& draw);

// RandomFlip(direction="horizontal"): columns mirrored, x1' = w - x2, x2' = w - x1.
void flip_horizontal(LabeledImage& item);

}  // namespace lab::train
