// The pipeline run and the per-layer comparison with the CPU reference.
#include "pipeline_session.hpp"

#include <chrono>
#include <cmath>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/image/letterbox.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::viewer {

namespace {

constexpr int kImageSize = 640;

std::vector<AttentionMapInfo> attention_maps(Network& network, const LetterboxGeometry& g) {
  std::vector<AttentionMapInfo> out;
  for (const std::string& name : network.tensor_names()) {
    if (name.rfind("attn.", 0) != 0) continue;
    const NamedTensor t = network.tensor(name);
    if (t.shape.size() != 4) continue;
    AttentionMapInfo info{name, static_cast<int>(t.shape[1]), static_cast<int>(t.shape[2])};
    for (int stride : {32, 16, 8, 64})
      if ((g.width / stride) * (g.height / stride) == info.tokens) {
        info.stride = stride;
        info.grid_w = g.width / stride;
        info.grid_h = g.height / stride;
        break;
      }
    if (info.stride > 0) out.push_back(info);
  }
  return out;
}

}  // namespace

PipelineRun run_pipeline(const RuntimeContext& context, const std::string& image_path,
                         const std::string& executor) {
  PipelineRun run;
  run.image_path = image_path;
  run.executor = executor;
  try {
    const ModelLocation location = locate_model(default_model_search(""));
    run.model_path = location.path.string();
    run.model_origin = location.origin;
    run.model =
        std::make_shared<const Yolo26Model>(Yolo26Model::from_checkpoint(load_checkpoint(location.path)));
    run.image = decode_image(image_path);
    run.geometry = letterbox_geometry(run.image.width, run.image.height, kImageSize, true);
    append_nchw(letterbox(run.image, run.geometry), run.input);
    if (executor == "reference") {
      run.network = make_reference_network(*run.model);
    } else {
      run.backend = make_backend(executor, context);
      run.network = make_kernel_network(*run.model, *run.backend);
    }
    run.network->set_layer_timing(true);
    const auto start = std::chrono::steady_clock::now();
    run.network->forward(run.input.data(), 1, run.geometry.height, run.geometry.width);
    run.forward_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    run.layer_times = run.network->layer_times();
    run.tensor_names = run.network->tensor_names();
    const std::vector<float> rows = run.network->detections();
    for (size_t i = 0; i + 5 < rows.size(); i += 6) {
      if (!(rows[i + 4] > 0)) continue;
      const Box box = scale_box_to_source({rows[i], rows[i + 1], rows[i + 2], rows[i + 3]}, run.geometry);
      Detection d;
      d.class_id = static_cast<int>(rows[i + 5]);
      d.name = d.class_id >= 0 && d.class_id < static_cast<int>(run.model->class_names.size())
                   ? run.model->class_names[static_cast<size_t>(d.class_id)]
                   : std::to_string(d.class_id);
      d.score = rows[i + 4];
      d.x1 = box.x1, d.y1 = box.y1, d.x2 = box.x2, d.y2 = box.y2;
      run.detections.push_back(d);
    }
    run.attentions = attention_maps(*run.network, run.geometry);
  } catch (const std::exception& e) {
    run.failure = e.what();
    run.network.reset();
  }
  return run;
}

std::vector<LayerError> compare_with_reference(const PipelineRun& run) {
  const std::unique_ptr<Network> reference = make_reference_network(*run.model);
  reference->forward(run.input.data(), 1, run.geometry.height, run.geometry.width);
  std::vector<LayerError> out;
  for (const std::string& name : run.tensor_names) {
    if (name.rfind("layer", 0) != 0 && name.rfind("attn.", 0) != 0 && name.rfind("head.", 0) != 0) continue;
    const NamedTensor a = run.network->tensor(name);
    const NamedTensor b = reference->tensor(name);
    LayerError e{name};
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < std::min(a.values.size(), b.values.size()); ++i) {
      const double d = static_cast<double>(a.values[i]) - b.values[i];
      diff2 += d * d;
      ref2 += static_cast<double>(b.values[i]) * b.values[i];
      e.max_abs = std::max(e.max_abs, std::isfinite(d) ? std::abs(d) : INFINITY);
    }
    e.rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-30));
    e.count = a.values.size();
    if (a.values.size() != b.values.size()) e.max_abs = INFINITY;
    out.push_back(e);
  }
  return out;
}

}  // namespace lab::viewer
