// The detector: owns the model description, the executor (the CPU reference, or our kernels on a cuda / cpu
// backend) and one Network, and turns decoded images into detections: letterbox (pre-process), forward
// (inference), keep rows of the network's [B, max_det, 6] output with score > conf and map them back to the
// source image (post-process).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/host_buffer.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/detect/batching.hpp"
#include "pipeline/detect/detection.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/network.hpp"

namespace lab {

struct DetectorOptions {
  int imgsz = 640;     // a multiple of 32
  bool rect = true;    // minimum rectangle letterbox; false: imgsz x imgsz
  float conf = 0.25f;  // keep scores strictly above
  int max_det = 300;   // rows of the end-to-end top-k
  std::vector<int> classes;  // keep only these class ids (after the top-k, as Ultralytics does); empty: all
  Precision precision =
      Precision::Fp32;  // of the dense convs on a kernel executor (the reference is float64)
  LayoutChoice layout = LayoutChoice::Auto;  // of the activations on a kernel executor (activation_layout.hpp)
};

// An image ready for a forward, letterboxed or staged for the device's letterbox. Pre-processing is
// independent of the network, so it runs on any thread (the host workers of detect_stream) while another
// batch is in the forward.
struct PreparedImage {
  std::string file;
  int width = 0, height = 0;  // the source image
  LetterboxGeometry geometry;
  ImageInput input;  // in the caller's memory: [3, geometry.height, geometry.width] RGB / 255, or staged
  double preprocess_ms = 0;
};
// The floats one letterboxed image of these options needs at most (3 x imgsz x imgsz).
size_t max_input_floats(const DetectorOptions& options);
// Prepares `image` in `slot` (room for max_input_floats(options) floats, 16-byte aligned, e.g. a staging
// slot): with `stage` and where its block fits the slot, as a staged letterbox (staged_letterbox.hpp: a copy of
// the pixels, for a network that letterboxes on the device), else letterboxed into float planes.
PreparedImage prepare_image(const Image& image, const std::string& file, const DetectorOptions& options,
                            float* slot, bool stage = false);

// The executors a forward runs on, by the user's word: our kernels on each backend available here (its name),
// then the CPU reference ("reference").
std::vector<std::string> available_executors();
// Whether `executor` runs our run-time-compiled kernels (a backend's name) rather than the CPU reference.
bool runs_our_kernels(const std::string& executor);

class Detector {
 public:
  // `executor`: "reference", "cuda" or "cpu" (the last two run our kernels on that backend).
  Detector(Yolo26Model model, const std::string& executor, const RuntimeContext& context,
           const DetectorOptions& options);
  ~Detector();
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  const Yolo26Model& model() const { return model_; }
  const DetectorOptions& options() const { return options_; }
  std::string executor_name() const;
  std::string activation_layout() const { return network_->activation_layout(); }  // "nchw" or "nhwc"
  Network& network() { return *network_; }  // the last forward's tensors, for --dump and the viewer
  bool letterboxes_on_device() const { return network_->letterboxes_on_device(); }

  // Builds the network's plan (arena, captured graph) of each shape before the first forward needs it.
  void prepare(const std::vector<BatchShape>& shapes);
  // Host memory to stage network inputs in: page-locked on cuda, so their uploads are DMA.
  HostBuffer alloc_staging(size_t bytes);

  // One forward over images whose letterboxed shapes are equal (UsageError otherwise); `files` names them.
  std::vector<ImageDetections> detect(const std::vector<const Image*>& images,
                                      const std::vector<std::string>& files);
  // The same over images prepared with this Detector's options (each uploaded from where it lies).
  std::vector<ImageDetections> detect(const std::vector<const PreparedImage*>& images);

 private:
  Yolo26Model model_;
  DetectorOptions options_;
  std::unique_ptr<Backend> backend_;  // null for the reference executor
  std::unique_ptr<Network> network_;
};

}  // namespace lab
