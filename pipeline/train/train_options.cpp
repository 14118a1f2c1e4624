// TrainOptions' checks and args.yaml (train_options.hpp). One table of the settings (visit_settings) serves
// both the writing and the reading of args.yaml.
#include "pipeline/train/train_options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <sstream>

#include "kernels/optim/optimizer_choice.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/train/device_list.hpp"

namespace lab::train {
namespace {

// Calls visit(key, field) for every setting, in args.yaml's order.
template <class Options, class Visit>
void visit_settings(Options& o, Visit&& visit) {
  visit("data", o.data), visit("model", o.model), visit("epochs", o.epochs), visit("batch", o.batch);
  visit("imgsz", o.imgsz), visit("optimizer", o.optimizer), visit("lr0", o.lr0), visit("lrf", o.lrf);
  visit("momentum", o.momentum), visit("weight_decay", o.weight_decay);
  visit("warmup_epochs", o.warmup_epochs), visit("warmup_momentum", o.warmup_momentum);
  visit("warmup_bias_lr", o.warmup_bias_lr), visit("nbs", o.nbs);
  visit("patience", o.patience), visit("seed", o.seed), visit("workers", o.workers);
  visit("max_norm", o.max_norm), visit("val", o.val), visit("project", o.project), visit("name", o.name);
  visit("exist_ok", o.exist_ok), visit("backend", o.backend), visit("engine", o.engine);
  visit("precision", o.precision), visit("bn", o.bn), visit("devices", o.devices);
  auto& a = o.augment;
  visit("hsv_h", a.hsv_h), visit("hsv_s", a.hsv_s), visit("hsv_v", a.hsv_v), visit("degrees", a.degrees);
  visit("translate", a.translate), visit("scale", a.scale), visit("shear", a.shear);
  visit("perspective", a.perspective), visit("fliplr", a.fliplr), visit("mosaic", a.mosaic);
  visit("close_mosaic", a.close_mosaic);
}

std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void require(bool ok, const std::string& option, const std::string& value, const std::string& rule) {
  if (!ok) throw UsageError("--" + option + " " + printable(value) + ": " + rule);
}
void require_int(int v, const std::string& option, int min, int max) {
  require(v >= min && v <= max, option, std::to_string(v),
          "must be in " + std::to_string(min) + ".." + std::to_string(max));
}
void require_real(double v, const std::string& option, double min, double max, bool min_open) {
  const bool above = min_open ? v > min : v >= min;
  require(above && v <= max, option, shown(v),
          std::string("must be in ") + (min_open ? "(" : "[") + shown(min) + ", " + shown(max) + "]");
}
void require_member(const std::string& v, const std::string& option,
                    std::initializer_list<const char*> names) {
  std::string list;
  bool found = false;
  for (const char* n : names) {
    found = found || v == n;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  require(found, option, v, "is not one of " + list);
}

}  // namespace

void check_train_options(const TrainOptions& o) {
  require(!o.data.empty(), "data", "''", "needs a dataset YAML");
  require_int(o.epochs, "epochs", 1, 100000);
  require_int(o.batch, "batch", 1, 4096);
  require_int(o.imgsz, "imgsz", 32, 4096);
  choose_optimizer(o.optimizer, o.lr0, o.momentum, 0, 1);  // names the valid optimizers
  require_real(o.lr0, "lr0", 0, 1, true);
  require_real(o.lrf, "lrf", 0, 1, true);
  require_real(o.momentum, "momentum", 0, 0.999999, false);
  require_real(o.weight_decay, "weight-decay", 0, 0.1, false);
  require_real(o.warmup_epochs, "warmup-epochs", 0, 1000, false);
  require_real(o.warmup_momentum, "warmup-momentum", 0, 0.999999, false);
  require_real(o.warmup_bias_lr, "warmup-bias-lr", 0, 1, false);
  require_int(o.nbs, "nbs", 1, 65536);
  check_augment_settings(o.augment);
  require_int(o.patience, "patience", 0, 100000);
  require_int(o.workers, "workers", 0, 256);
  require_real(o.max_norm, "max-norm", 0, 1e6, true);
  require(!o.project.empty(), "project", "''", "needs a folder");
  require(!o.name.empty() && o.name.find('/') == std::string::npos && o.name != "." && o.name != "..", "name",
          o.name, "must be one folder name");
  require_member(o.backend, "backend", {"cpu", "cuda", "reference"});
  require_member(o.engine, "engine", {"host", "device"});
  require(o.engine == "host" || o.backend != "reference", "engine", o.engine,
          "runs our kernels: --backend cpu or cuda (the reference trains with --engine host)");
  require_member(o.precision, "precision", {"fp32", "fp16", "bf16"});
  require(o.precision == "fp32" || o.engine == "device", "precision", o.precision,
          "16-bit training runs on the device engine (--engine device)");
  require_member(o.bn, "bn", {"frozen", "batch"});
  check_node_options(o);
  const size_t ranks = std::max<size_t>(device_list(o.devices, o.backend, cuda_device_count()).size(), 1) *
                       size_t(o.nnodes);
  if (ranks > 1) {
    const std::string devices = "(" + (o.devices.empty() ? std::string("one device") : "--devices " + o.devices) +
                                (o.nnodes > 1 ? " x --nnodes " + std::to_string(o.nnodes) : "") + ")";
    require(o.engine == "device", "engine", o.engine,
            "data-parallel training " + devices + " runs the device engine");
    require(o.batch % int(ranks) == 0, "batch", std::to_string(o.batch),
            "the total batch does not divide over " + std::to_string(ranks) + " ranks " + devices);
  }
  const long long deepest = (long long)(o.imgsz / 32) * (o.imgsz / 32);  // positions of a stride-32 map
  require(o.bn == "frozen" || o.batch * deepest >= 2, "bn", o.bn,
          "one value per channel at stride 32 (--batch 1 at --imgsz " + std::to_string(o.imgsz) +
              "): batch statistics need two");
}

void check_node_options(const TrainOptions& o) {
  require_int(o.nnodes, "nnodes", 1, 4096);
  require(o.node_rank >= 0 && o.node_rank < o.nnodes, "node-rank", std::to_string(o.node_rank),
          "must be in 0.." + std::to_string(o.nnodes - 1) + " (--nnodes " + std::to_string(o.nnodes) + ")");
  const bool joined = !o.rendezvous.empty() || !o.master.empty();
  require(joined || o.nnodes == 1, "nnodes", std::to_string(o.nnodes),
          "the nodes meet through --rendezvous FILE or --master HOST:PORT");
  if (!joined) return;
  const auto [flag, value] = !o.rendezvous.empty() ? std::pair{"rendezvous", o.rendezvous}
                                                   : std::pair{"master", o.master};
  if (!o.rendezvous.empty()) {
    const std::filesystem::path folder = std::filesystem::path(o.rendezvous).parent_path();
    require(folder.empty() || std::filesystem::is_directory(folder), flag, value,
            "the folder " + printable_path(folder) + " does not exist (a folder every node sees)");
  }
  require(o.backend == "cuda", flag, value,
          "multi-host training runs on --backend cuda (NCCL); the " + o.backend +
              " backend's ranks are threads of one process");
  require(o.engine == "device", flag, value, "multi-host training runs the device engine");
}

std::string args_yaml(const TrainOptions& options) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  visit_settings(
      options, [&](const char* key, const auto& value) { out << YAML::Key << key << YAML::Value << value; });
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

TrainOptions read_args_yaml(const std::filesystem::path& file) {
  const std::string where = printable_path(file);
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    throw UsageError(where + ": " + e.what());
  }
  if (!root.IsMap()) throw UsageError(where + ": not a mapping of settings");
  TrainOptions options;
  visit_settings(options, [&](const char* key, auto& value) {
    const YAML::Node node = root[key];
    if (!node && (std::string(key) == "bn" || std::string(key) == "devices"))
      return;  // a run from before --bn / --devices: frozen, one rank
    if (!node) throw UsageError(where + ": no '" + key + "'");
    try {
      value = node.as<std::remove_reference_t<decltype(value)>>();
    } catch (const YAML::Exception&) {
      throw UsageError(where + ":" + std::to_string(node.Mark().line + 1) + ": '" + key + "' is not valid");
    }
  });
  return options;
}

}  // namespace lab::train
