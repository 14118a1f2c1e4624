// Every convolution of a Yolo26Model, visited in state-dict order (layer by layer; within a module in the
// order Ultralytics registers its children; the Detect head's one-to-many cv2/cv3 before one2one_cv2/cv3):
// what names and orders the model's trainable parameters.
#pragma once
#include <functional>

#include "pipeline/model/yolo26_model.hpp"

namespace lab {

void for_each_conv(const Yolo26Model& model, const std::function<void(const ConvSpec&)>& visit);
void for_each_conv(Yolo26Model& model, const std::function<void(ConvSpec&)>& visit);

}  // namespace lab
