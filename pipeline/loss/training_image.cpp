// load_training_image: decode, letterbox_into_nchw with lab detect's geometry, labels through image_letterbox
// (the same geometry) and labels_to_input.
#include "pipeline/loss/training_image.hpp"

#include "pipeline/image/image.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/letterbox.hpp"

namespace lab::loss {

TrainingImage load_training_image(const std::filesystem::path& image, const std::filesystem::path& labels,
                                  int imgsz, bool rect, int num_classes) {
  const std::vector<YoloLabel> read = read_labels_file(labels).labels;
  for (const YoloLabel& l : read)
    if (l.cls < 0 || l.cls >= num_classes)
      throw UsageError(labels.string() + (l.line > 0 ? ":" + std::to_string(l.line) : std::string()) +
                       ": class " + std::to_string(l.cls) + " is not one of the model's " +
                       std::to_string(num_classes) + " classes");
  const Image decoded = decode_image(image);
  const LetterboxGeometry geometry = letterbox_geometry(decoded.width, decoded.height, imgsz, rect);
  TrainingImage t;
  t.height = geometry.height;
  t.width = geometry.width;
  t.input.resize(size_t(3) * t.height * t.width);
  letterbox_into_nchw(decoded, geometry, t.input.data());
  t.letterbox = image_letterbox(decoded.width, decoded.height, imgsz, rect);
  t.ground_truth = labels_to_input(read, t.letterbox);
  return t;
}

}  // namespace lab::loss
