// `lab convert IN OUT.safetensors`: loads a checkpoint (.pt or .safetensors, by content) and writes it as our
// safetensors interchange file (tensors in their stored dtype, names / nc / scale / yaml as metadata), or,
// for an OUT ending in .pt, as a torch state-dict .pt (torch_checkpoint_writer.hpp), atomically; prints one
// summary line.
#include <iostream>
#include <set>

#include "lab/commands.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"

namespace lab {
namespace {

struct ConvertOptions {
  std::string input, output;
};

void run_convert(const ConvertOptions& o) {
  const Checkpoint checkpoint = load_checkpoint(o.input);
  if (std::filesystem::path(o.output).extension() == ".pt")
    save_checkpoint_pt(checkpoint, o.output);
  else
    save_checkpoint_safetensors(checkpoint, o.output);
  size_t parameters = 0;
  std::set<std::string> dtypes;
  for (const auto& [key, tensor] : checkpoint.state_dict) {
    parameters += tensor.element_count();
    dtypes.insert(tensor.stored_dtype);
  }
  std::string dtype_list;
  for (const std::string& d : dtypes) dtype_list += (dtype_list.empty() ? "" : "+") + d;
  std::cout << "wrote " << o.output << ": " << checkpoint.state_dict.size() << " tensors, " << parameters
            << " parameters, dtype " << dtype_list << ", nc " << checkpoint.nc << ", scale "
            << (checkpoint.scale.empty() ? "(none)" : checkpoint.scale) << "\n";
}

}  // namespace

void add_convert_command(CLI::App& app, CliState& /*state*/) {
  auto* cmd =
      app.add_subcommand("convert",
                         "Convert a checkpoint (.pt or .safetensors) to a safetensors file or a torch "
                         "state-dict .pt");
  auto o = std::make_shared<ConvertOptions>();
  cmd->add_option("IN", o->input, "Checkpoint to read: an Ultralytics .pt or a .safetensors file")
      ->required();
  cmd->add_option(
         "OUT", o->output,
         "File to write (replaced atomically): safetensors, or a torch state-dict when it ends in .pt")
      ->required();
  cmd->footer(
      "Examples:\n"
      "  lab convert yolo26n.pt yolo26n.safetensors\n"
      "  lab convert yolo26n.safetensors copy.safetensors    # validates and rewrites\n"
      "  lab convert best.safetensors best.pt                # a torch state dict (weights_only loads it)\n");
  cmd->callback([o] { run_convert(*o); });
}

}  // namespace lab
