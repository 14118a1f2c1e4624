// `lab loss`: the YOLO26 training loss (both heads, epoch-weighted) of raw head outputs read from a
// safetensors file against YOLO-format labels, on the device path (assignment and every term on the backend's
// kernels) or with --path host (the host assigner's path); prints the components and which path ran and,
// where the file stores gradients, how ours compare; --grad-out writes ours.
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lab/commands.hpp"
#include "lab/option_checks.hpp"
#include "lab/size_options.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/loss/head_file.hpp"
#include "pipeline/loss/labels.hpp"
#include "pipeline/loss/yolo26_loss.hpp"
#include "lab/table.hpp"

namespace lab {
namespace {

struct LossOptions {
  std::string heads, labels, letterbox_json, backend, grad_out;
  std::string path = "device";
  int imgsz = 640;
  std::vector<double> pad, orig_size;
  double scale = 0;
  bool rect = false;
  int epoch = 0, epochs = 100;
  double box_gain = 7.5, cls_gain = 0.5, l1_gain = 1.5;
  double grad_tol = 1e-4;
  bool json = false;
};

std::string number(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

// The letterbox that maps the labels (normalised to the original image) into the network input, and so the
// input size: from --letterbox-json or --scale/--pad (imgsz square), else the labels JSON's own "letterbox",
// else --orig-size with lab detect's letterbox (square, or --rect). Without any of them the mapping is
// unknown: a usage error, never a silent guess.
loss::Letterbox resolve_letterbox(const LossOptions& o, const std::optional<loss::Letterbox>& from_labels) {
  const bool manual = o.scale > 0 || !o.pad.empty();
  if (!o.letterbox_json.empty() && manual)
    throw UsageError("loss: give --letterbox-json or --scale/--pad, not both");
  if (o.rect && (manual || !o.letterbox_json.empty() || o.orig_size.empty()))
    throw UsageError("loss: --rect computes the letterbox from --orig-size and goes without "
                     "--letterbox-json/--scale/--pad");
  const int w = static_cast<int>(o.orig_size.empty() ? 0 : o.orig_size[0]);
  const int h = static_cast<int>(o.orig_size.empty() ? 0 : o.orig_size[1]);
  if (manual) {
    loss::Letterbox box;
    box.input_width = box.input_height = o.imgsz;
    box.scale = o.scale > 0 ? o.scale : 1.0;
    box.pad_x = o.pad.empty() ? 0 : o.pad[0];
    box.pad_y = o.pad.empty() ? 0 : o.pad[1];
    box.original_width = w > 0 ? w : static_cast<int>(std::lround((o.imgsz - 2 * box.pad_x) / box.scale));
    box.original_height = h > 0 ? h : static_cast<int>(std::lround((o.imgsz - 2 * box.pad_y) / box.scale));
    return box;
  }
  std::optional<loss::Letterbox> box =
      o.letterbox_json.empty() ? from_labels : loss::read_letterbox_json(o.letterbox_json);
  if (box && !o.rect) {
    if (w > 0) box->original_width = w, box->original_height = h;
    return *box;
  }
  if (w > 0) return loss::image_letterbox(w, h, o.imgsz, o.rect);
  throw UsageError("loss: " + o.labels +
                   " is normalised to the original image, so the letterbox is needed: give --orig-size W H "
                   "(lab detect's letterbox, square or --rect), --letterbox-json FILE or --scale S --pad X Y "
                   "(--scale 1 --pad 0 0 for labels normalised to the network input)");
}

nlohmann::json head_json(const loss::HeadLoss& h) {
  return {{"box_loss", h.box},
          {"cls_loss", h.cls},
          {"l1_loss", h.l1},
          {"positives", h.positives},
          {"target_score_sum", h.target_score_sum}};
}

// The file's stored gradients are the external check of the labels and letterbox: beyond --grad-tol the
// result is not the loss the file was made with, so the command fails (exit 1) naming the worst tensor.
void check_stored_gradients(const LossOptions& o, const std::map<std::string, double>& stored, CliState& state) {
  const auto worst = std::max_element(stored.begin(), stored.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
  if (worst == stored.end() || worst->second <= o.grad_tol) return;
  std::cerr << "lab: loss: our gradient of " << worst->first << " differs from the stored " << worst->first
            << ".grad by relative L2 " << format_sci(worst->second) << " (tolerance " << format_sci(o.grad_tol)
            << "): the labels or the letterbox are not the ones the heads file was made with\n";
  state.exit_code = 1;
}

void run_loss(const LossOptions& o, CliState& state) {
  if (o.heads.empty() || o.labels.empty()) throw UsageError("loss: --heads and --labels are required");

  const SafetensorsFile file = SafetensorsFile::load(o.heads);
  const loss::LabelsFile labels = loss::read_labels_file(o.labels);
  const loss::Letterbox letterbox = resolve_letterbox(o, labels.letterbox);
  loss::LossBatch batch = loss::load_head_outputs(file, letterbox.input_height, letterbox.input_width);
  if (batch.batch != 1)
    throw UsageError(o.heads + ": batch " + std::to_string(batch.batch) +
                     ", but a labels file describes one image");
  batch.ground_truth[0] = loss::labels_to_input(labels.labels, letterbox);

  loss::LossConfig config;
  config.epoch = o.epoch, config.epochs = o.epochs;
  config.box_gain = o.box_gain, config.cls_gain = o.cls_gain, config.l1_gain = o.l1_gain;
  const std::string backend_name = o.backend.empty() ? default_backend_name() : o.backend;
  const std::unique_ptr<Backend> backend = make_backend(backend_name, state.context());
  const loss::LossPath path = o.path == "host" ? loss::LossPath::host : loss::LossPath::device;
  const loss::Yolo26Loss loss(*backend, config, path);
  const loss::LossResult result = loss.compute(batch);
  const auto stored = loss::compare_stored_gradients(file, result);
  if (!o.grad_out.empty()) loss::write_gradients(o.grad_out, batch, result);
  check_stored_gradients(o, stored, state);

  if (o.json) {
    nlohmann::json out = {{"heads", o.heads},
                          {"labels", o.labels},
                          {"backend", backend_name},
                          {"path", loss::loss_path_name(path)},
                          {"epoch", o.epoch},
                          {"epochs", o.epochs},
                          {"hyp", {{"box", o.box_gain}, {"cls", o.cls_gain}, {"l1", o.l1_gain}}},
                          {"weights", {{"o2m", result.weights.one2many}, {"o2o", result.weights.one2one}}},
                          {"one2many", head_json(result.one2many)},
                          {"one2one", head_json(result.one2one)},
                          {"total", result.total},
                          {"stored_gradient_rel_l2", stored},
                          {"stored_gradient_tolerance", o.grad_tol}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "heads " << o.heads << " (batch 1, " << batch.num_classes << " classes, "
            << batch.anchors.size() << " anchors), labels " << o.labels << " (" << labels.labels.size()
            << " boxes), backend " << backend_name << " (" << backend->device().name << ")\n"
            << "path " << loss::loss_path_name(path)
            << (path == loss::LossPath::device ? " (assignment, box, L1 and class terms on the backend's kernels)"
                                               : " (assignment, L1 and chain rule on the host in float64)")
            << "\n"
            << "epoch " << o.epoch << " of " << o.epochs << ": weights o2m "
            << number(result.weights.one2many) << ", o2o " << number(result.weights.one2one) << "; gains box "
            << o.box_gain << ", cls " << o.cls_gain << ", l1 " << o.l1_gain << "\n\n";
  Table table({"head", "box_loss", "cls_loss", "l1_loss", "positives", "target_score_sum"});
  for (const auto& [name, h] : {std::pair{"one2many", result.one2many}, std::pair{"one2one", result.one2one}})
    table.add({name, number(h.box), number(h.cls), number(h.l1), std::to_string(h.positives),
               number(h.target_score_sum)});
  table.print(std::cout);
  std::cout << "\ntotal " << number(result.total) << "\n";
  if (!stored.empty()) {
    std::cout << "\ngradients vs the file's stored *.grad (relative L2):";
    for (const auto& [key, value] : stored) std::cout << " " << key << " " << format_sci(value);
    std::cout << "\n";
  }
  if (!o.grad_out.empty()) std::cout << "gradients written to " << o.grad_out << "\n";
}

}  // namespace

void add_loss_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand(
      "loss",
      "YOLO26 training loss (E2ELoss: one-to-many + one-to-one heads) of raw head outputs against labels, "
      "with the gradients");
  auto o = std::make_shared<LossOptions>();
  cmd->add_option(
      "--heads", o->heads,
      "safetensors with one2many.boxes [B,4,A], one2many.scores [B,nc,A], one2one.* (optional *.grad)");
  cmd->add_option("--labels", o->labels,
                  "YOLO labels (class cx cy w h, normalised to the original image; needs the letterbox), or a "
                  "bus_loss.json-like file with labels_yolo_txt_original_image and its letterbox");
  cmd->add_option("--imgsz", o->imgsz,
                  "Network input size (with --scale/--pad or --orig-size; a letterbox JSON gives its own)")
      ->check(imgsz_range())
      ->capture_default_str();
  cmd->add_option("--letterbox-json", o->letterbox_json,
                  "bus_loss.json-like file: letterbox.scale, letterbox.pad_left_top, letterbox.size");
  cmd->add_option("--scale", o->scale, "Letterbox scale (original -> input)");
  cmd->add_option("--pad", o->pad, "Letterbox padding left top, in input pixels")->expected(2);
  cmd->add_option("--orig-size", o->orig_size,
                  "Original image width height (alone: lab detect's letterbox to imgsz; with --scale: instead "
                  "of round((imgsz - 2 pad) / scale))")
      ->expected(2);
  cmd->add_flag("--rect", o->rect,
                "With --orig-size: lab detect's rect letterbox (the smallest multiple-of-32 rectangle), not "
                "imgsz x imgsz");
  cmd->add_option("--epoch", o->epoch, "Epoch (o2m weight 0.8 -> 0.1 linearly)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "Number of epochs")->check(at_least(1))->capture_default_str();
  cmd->add_option("--box-gain", o->box_gain, "Gain of the CIoU term")->capture_default_str();
  cmd->add_option("--cls-gain", o->cls_gain, "Gain of the BCE term")->capture_default_str();
  cmd->add_option("--l1-gain", o->l1_gain, "Gain of the L1 distance term")->capture_default_str();
  cmd->add_option("--backend", o->backend, "cuda or cpu (default: cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--path", o->path,
                  "device: the assignment and every term on the backend's kernels; host: the float64 host "
                  "assigner, L1 and chain rule on the host (the reference path)")
      ->check(CLI::IsMember({"device", "host"}))
      ->capture_default_str();
  cmd->add_option("--grad-out", o->grad_out, "Write d total / d raw outputs here (safetensors, *.grad keys)");
  cmd->add_option("--grad-tol", o->grad_tol,
                  "Largest relative L2 of ours against the file's stored *.grad before the check fails (exit 1)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->footer(
      "Examples:\n"
      "  lab loss --heads heads.safetensors --labels labels.txt --letterbox-json letterbox.json\n"
      "  lab loss --heads bus_loss_golden.safetensors --labels bus_loss.json --grad-out grads.safetensors\n");
  cmd->callback([&state, o] { run_loss(*o, state); });
}

}  // namespace lab
