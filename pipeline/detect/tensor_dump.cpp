// Per-image safetensors dumps of a forward's named tensors (each tensor's leading dimension is the batch).
#include "pipeline/detect/tensor_dump.hpp"

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/safetensors.hpp"

namespace lab {

void dump_network_tensors(Network& network, const std::vector<std::string>& files,
                          const std::filesystem::path& dir) {
  std::vector<NamedTensor> tensors;
  for (const std::string& name : network.tensor_names()) tensors.push_back(network.tensor(name));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(dir.string() + ": cannot create the folder (" + ec.message() + ")");
  for (size_t b = 0; b < files.size(); ++b) {
    std::vector<SafetensorsTensor> image_tensors;
    for (const NamedTensor& t : tensors) {
      std::vector<int64_t> shape = t.shape;
      if (shape.empty() || shape[0] != int64_t(files.size()))
        throw RuntimeError("tensor '" + t.name + "' has no batch dimension of " +
                           std::to_string(files.size()));
      const size_t per_image = t.values.size() / files.size();
      shape[0] = 1;
      const auto first = t.values.begin() + long(b * per_image);
      image_tensors.push_back(f32_tensor(t.name, shape, std::vector<float>(first, first + long(per_image))));
    }
    const std::filesystem::path path =
        dir / (std::filesystem::path(files[b]).stem().string() + ".safetensors");
    write_file_atomically(path, [&](const std::filesystem::path& temporary) {
      write_safetensors(temporary, image_tensors,
                        {{"image", files[b]}, {"executor", network.executor_name()}});
    });
  }
}

}  // namespace lab
