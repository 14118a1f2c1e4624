// What the detector returns per image: the detections in source-image pixels, the letterbox used, and the
// time spent in each stage (the forward's time is the batch's divided by the images in it).
#pragma once
#include <string>
#include <vector>

#include "pipeline/image/letterbox.hpp"

namespace lab {

struct Detection {
  int class_id = 0;
  std::string name;
  float score = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // source-image pixels, clipped to the image
};

struct StageTimes {
  double preprocess_ms = 0, inference_ms = 0, postprocess_ms = 0;
  double upload_ms = 0;  // the part of inference_ms that took the input to the network
};

struct ImageDetections {
  std::string file;  // as given (the path of the image)
  int width = 0, height = 0;
  LetterboxGeometry geometry;         // geometry.width x geometry.height is the network input
  int batch = 1;                      // images in the forward this one was part of
  std::vector<Detection> detections;  // sorted by score, highest first
  StageTimes times;
};

}  // namespace lab
