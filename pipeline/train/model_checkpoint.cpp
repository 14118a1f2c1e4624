// checkpoint_of: one walk over the model's convolutions (pipeline/model/model_convs.hpp), writing each one's
// state tensors (state_tensors.hpp) under their state-dict names, then the metadata; save_trained_weights
// writes it in both formats.
#include "pipeline/train/model_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/train/state_tensors.hpp"

namespace lab::train {

namespace {

void put_conv(Checkpoint& checkpoint, const ConvSpec& conv) {
  const std::vector<int64_t> weight_shape = {conv.c_out, conv.c_in / conv.groups, conv.kernel, conv.kernel};
  const std::vector<int64_t> channels = {conv.c_out};
  const std::vector<float>* weight = conv.bn ? &conv.conv_weight : &conv.weight;
  for (const auto& [key, values] : state_tensors(conv))
    checkpoint.state_dict[key] = HostTensor{values == weight ? weight_shape : channels, *values, "F32"};
}

// model.yaml with its nc set to the model's (other keys as the base had them; "{}" stays "{}").
std::string yaml_with_class_count(const std::string& base_yaml, int nc) {
  nlohmann::json yaml = nlohmann::json::parse(base_yaml.empty() ? "{}" : base_yaml, nullptr, false);
  if (!yaml.is_object()) yaml = nlohmann::json::object();
  if (!yaml.empty()) yaml["nc"] = nc;
  return yaml.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Checkpoint checkpoint_of(const Yolo26Model& trained, const Checkpoint& base) {
  if (static_cast<int>(trained.class_names.size()) != trained.nc)
    throw UsageError(trained.source + ": the model has " + std::to_string(trained.class_names.size()) +
                     " class names for nc = " + std::to_string(trained.nc));
  Checkpoint checkpoint = base;
  for_each_conv(trained, [&checkpoint](const ConvSpec& conv) { put_conv(checkpoint, conv); });
  checkpoint.class_names = trained.class_names;
  checkpoint.nc = trained.nc;
  checkpoint.scale = trained.scale;
  checkpoint.yaml_json = yaml_with_class_count(base.yaml_json, trained.nc);
  return checkpoint;
}

std::pair<std::filesystem::path, std::filesystem::path> save_trained_weights(
    const Yolo26Model& trained, const Checkpoint& base, const std::filesystem::path& folder,
    const std::string& stem, const TrainingRecord& record) {
  const Checkpoint checkpoint = checkpoint_of(trained, base);
  const std::filesystem::path safetensors = folder / (stem + ".safetensors"), pt = folder / (stem + ".pt");
  save_checkpoint_safetensors(checkpoint, safetensors);
  save_checkpoint_pt(checkpoint, pt, record);
  return {safetensors, pt};
}

}  // namespace lab::train
