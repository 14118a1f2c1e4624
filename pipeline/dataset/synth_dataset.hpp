// `lab data synth`: a synthetic YOLO-format detection dataset of coloured shapes (one class per shape) on
// textured backgrounds. Every image is drawn from its own random stream (seed, split, index), so the dataset
// depends only on the options, not on the number of threads. Objects may overlap, but every object keeps at
// least half of its box uncovered by later ones (a placement that would hide more is drawn again); each label
// is the object's full extent, for a partly hidden object too (an amodal box).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/dataset/synth_shapes.hpp"
#include "pipeline/loss/labels.hpp"

namespace lab::dataset {

struct SynthOptions {
  std::filesystem::path out;
  int classes = 3;           // 1..shape_names().size()
  int train = 64, val = 16;  // images per split (val may be 0 only if train is not)
  int imgsz = 640;           // square images of imgsz x imgsz pixels
  uint64_t seed = 0;
  int threads = 1;
};

struct SynthImage {
  Image image;
  std::vector<loss::YoloLabel> labels;
};

// Image `index` of split `split` (0 train, 1 val).
SynthImage synth_image(const SynthOptions& options, int split, int index);

// "class cx cy w h" lines, 6 decimals.
std::string yolo_label_lines(const std::vector<loss::YoloLabel>& labels);

// Writes OUT/images/{train,val}/NNNNNN.jpg, OUT/labels/{train,val}/NNNNNN.txt and OUT/data.yaml into a
// temporary folder beside OUT, renamed to OUT once complete (nothing is left at OUT on failure). OUT must not
// exist or be an empty folder; UsageError naming it otherwise, or for options out of range.
void write_synth_dataset(const SynthOptions& options);

}  // namespace lab::dataset
