// Detector: pre-process, forward, post-process, each timed with a steady clock.
#include "pipeline/detect/detector.hpp"

#include <algorithm>
#include <chrono>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/staged_letterbox.hpp"

namespace lab {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kReferenceExecutor = "reference";

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Yolo26Model with_max_det(Yolo26Model model, int max_det) {
  for (LayerSpec& layer : model.layers)
    if (layer.kind == LayerSpec::Kind::Detect) layer.detect.max_det = max_det;
  return model;
}

}  // namespace

std::vector<std::string> available_executors() {
  std::vector<std::string> executors = available_backends();
  executors.push_back(kReferenceExecutor);
  return executors;
}

bool runs_our_kernels(const std::string& executor) {
  return executor != kReferenceExecutor;
}

Detector::Detector(Yolo26Model model, const std::string& executor, const RuntimeContext& context,
                   const DetectorOptions& options)
    : model_(with_max_det(std::move(model), options.max_det)), options_(options) {
  if (options_.imgsz <= 0 || options_.imgsz % 32 != 0)
    throw UsageError("--imgsz " + std::to_string(options_.imgsz) + ": must be a positive multiple of 32");
  if (options_.max_det <= 0) throw UsageError("--max-det must be positive");
  if (runs_our_kernels(executor)) {
    backend_ = make_backend(executor, context);
    network_ = make_kernel_network(model_, *backend_, options_.precision, options_.layout);
  } else {
    if (options_.precision != Precision::Fp32)
      throw UsageError("--precision " + precision_name(options_.precision) +
                       " needs a kernel backend (cuda or cpu): the reference forward accumulates in float64");
    if (options_.layout == LayoutChoice::Nhwc)
      throw UsageError("--layout nhwc needs a kernel backend (cuda or cpu): the reference forward is float64 NCHW");
    network_ = make_reference_network(model_);
  }
}

Detector::~Detector() {
  network_.reset();  // before the backend it runs on
  backend_.reset();
}

std::string Detector::executor_name() const {
  return network_->executor_name();
}

size_t max_input_floats(const DetectorOptions& options) {
  return size_t(3) * size_t(options.imgsz) * size_t(options.imgsz);
}

PreparedImage prepare_image(const Image& image, const std::string& file, const DetectorOptions& options,
                            float* slot, bool stage) {
  const auto start = Clock::now();
  PreparedImage p;
  p.file = file;
  p.width = image.width;
  p.height = image.height;
  p.geometry = letterbox_geometry(image.width, image.height, options.imgsz, options.rect);
  if (stage && staged_letterbox_layout(p.geometry).bytes <= max_input_floats(options) * sizeof(float)) {
    p.input = stage_letterbox(image, p.geometry, slot);
  } else {
    letterbox_into_nchw(image, p.geometry, slot);
    p.input = slot;
  }
  p.preprocess_ms = ms_since(start);
  return p;
}

void Detector::prepare(const std::vector<BatchShape>& shapes) {
  for (const BatchShape& s : shapes) network_->prepare(s.batch, s.height, s.width);
}

HostBuffer Detector::alloc_staging(size_t bytes) {
  return backend_ ? backend_->alloc_host(bytes) : HostBuffer::pageable(bytes);
}

std::vector<ImageDetections> Detector::detect(const std::vector<const Image*>& images,
                                              const std::vector<std::string>& files) {
  if (images.empty() || images.size() != files.size()) throw UsageError("detect: no images in the batch");
  const size_t per_image = max_input_floats(options_);
  std::vector<float> inputs(per_image * images.size());
  std::vector<PreparedImage> prepared;
  for (size_t i = 0; i < images.size(); ++i)
    prepared.push_back(prepare_image(*images[i], files[i], options_, inputs.data() + i * per_image));
  std::vector<const PreparedImage*> pointers;
  for (const PreparedImage& p : prepared) pointers.push_back(&p);
  return detect(pointers);
}

std::vector<ImageDetections> Detector::detect(const std::vector<const PreparedImage*>& images) {
  if (images.empty()) throw UsageError("detect: no images in the batch");
  const int batch = int(images.size());
  std::vector<ImageDetections> results(images.size());
  std::vector<ImageInput> inputs;
  for (size_t i = 0; i < images.size(); ++i) {
    const PreparedImage& p = *images[i];
    ImageDetections& r = results[i];
    r.file = p.file;
    r.width = p.width;
    r.height = p.height;
    r.batch = batch;
    r.geometry = p.geometry;
    if (r.geometry.width != results[0].geometry.width || r.geometry.height != results[0].geometry.height)
      throw UsageError("detect: " + p.file + " has another letterboxed shape than " + results[0].file);
    inputs.push_back(p.input);
    r.times.preprocess_ms = p.preprocess_ms;
  }

  const auto forward_start = Clock::now();
  const double upload_ms = network_->forward_images(inputs, results[0].geometry.height, results[0].geometry.width);
  const std::vector<float> rows = network_->detections();
  const double forward_ms = ms_since(forward_start);

  const size_t per_image = rows.size() / images.size();
  const size_t row_count = std::min(per_image / 6, size_t(options_.max_det));
  for (size_t i = 0; i < images.size(); ++i) {
    const auto start = Clock::now();
    ImageDetections& r = results[i];
    r.times.inference_ms = forward_ms / batch;
    r.times.upload_ms = upload_ms / batch;
    for (size_t k = 0; k < row_count; ++k) {
      const float* row = rows.data() + i * per_image + k * 6;
      if (!(row[4] > options_.conf)) continue;
      Detection d;
      d.class_id = int(row[5]);
      if (!options_.classes.empty() &&
          std::find(options_.classes.begin(), options_.classes.end(), d.class_id) == options_.classes.end())
        continue;
      d.name = d.class_id >= 0 && d.class_id < int(model_.class_names.size())
                   ? model_.class_names[size_t(d.class_id)]
                   : std::to_string(d.class_id);
      d.score = row[4];
      const Box box = scale_box_to_source({row[0], row[1], row[2], row[3]}, r.geometry);
      d.x1 = box.x1, d.y1 = box.y1, d.x2 = box.x2, d.y2 = box.y2;
      r.detections.push_back(std::move(d));
    }
    std::stable_sort(r.detections.begin(), r.detections.end(),
                     [](const Detection& a, const Detection& b) { return a.score > b.score; });
    r.times.postprocess_ms = ms_since(start);
  }
  return results;
}

}  // namespace lab
