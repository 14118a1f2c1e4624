// `lab grad`: the YOLO26 training loss of one image against its labels and d total / d every trainable
// parameter of the checkpoint, from the float64 reference backward (pipeline/reference/reference_backward)
// or, with --backend cpu|cuda, from the kernel backward (pipeline/executor/kernel_backward: our float32
// kernels); prints the loss components and the gradient norm, and writes the gradients as float32
// "grad.<parameter name>" tensors (safetensors, written atomically); --steps takes optimizer steps on the
// image (Ultralytics' SGD or AdamW, pipeline/reference/reference_optimizer) and prints the loss after each.
#include <chrono>
#include <iostream>

#include "lab/commands.hpp"
#include "lab/network_options.hpp"
#include "lab/option_checks.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/loss/training_image.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "kernels/optim/optimizer_choice.hpp"
#include "pipeline/reference/reference_backward.hpp"
#include "pipeline/reference/reference_optimizer.hpp"
#include "pipeline/safetensors.hpp"

namespace lab {
namespace {

std::string number(double v) {
  return format_sig(v, 9);
}

struct GradOptions {
  std::string image, labels, model, out;
  int imgsz = 640;
  bool square = false;
  int steps = 0;
  std::string optimizer = "auto";
  std::string backend = "reference";
  std::string bn = "frozen";
  double lr = 0;  // 0: the optimizer choice's
};

// Ultralytics' choice for --optimizer (auto: AdamW with its lr fit for the class count, momentum 0.9; SGD and
// AdamW: lr0 0.01, momentum 0.937), --lr replacing the learning rate.
reference::OptimizerSettings optimizer_settings(const GradOptions& o, int class_count) {
  const OptimizerChoice choice = choose_optimizer(o.optimizer, 0.01, 0.937, 0, class_count);
  return {.name = choice.name, .lr = o.lr > 0 ? o.lr : choice.lr, .momentum = choice.momentum};
}

// --steps N: the loss before and after each of N optimizer steps on this one image.
void run_steps(const GradOptions& o, const Yolo26Model& model, const reference::RefTensor& input,
               const std::vector<loss::GtBox>& labels) {
  const reference::OptimizerSettings settings = optimizer_settings(o, model.nc);
  std::cout << "\n"
            << o.steps << " " << settings.name << " steps (lr " << number(settings.lr) << ", momentum "
            << number(settings.momentum) << ", weight decay 5e-4 on weights, gradient norm clipped at 10):\n";
  reference::reference_step_losses(
      model, input, {labels}, loss::LossConfig{}, settings, o.steps, [](int step, double loss) {
        std::cout << "  after " << step << " steps: loss " << number(loss) << "\n" << std::flush;
      });
}

void write_gradients(const std::string& path, const TrainingGradients& g, const std::string& model,
                     const std::string& backend) {
  std::vector<SafetensorsTensor> tensors;
  for (const ParameterGradient& p : g.parameters)
    tensors.push_back(
        f32_tensor("grad." + p.name, p.shape, std::vector<float>(p.values.begin(), p.values.end())));
  const std::map<std::string, std::string> metadata = {{"producer", "lab grad"},
                                                       {"model", model},
                                                       {"backend", backend},
                                                       {"total", number(g.total)},
                                                       {"grad_norm", number(g.norm)}};
  write_file_atomically(
      path, [&](const std::filesystem::path& temporary) { write_safetensors(temporary, tensors, metadata); });
}

// The reference's result in the form both backward paths report.
TrainingGradients training_gradients(reference::NetworkGradients g) {
  return {g.loss.one2many, g.loss.one2one, g.loss.weights, g.loss.total, std::move(g.parameters), g.norm};
}

void run_grad(const GradOptions& o, CliState& state) {
  if (o.steps > 0 && o.backend != "reference")
    throw UsageError("--steps: the optimizer steps run on the float64 reference only (--backend reference)");
  const BatchNormMode bn = batchnorm_mode(o.bn);
  const ModelLocation location = locate_model(default_model_search(o.model));
  Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(location.path));
  set_batchnorm_mode(model, bn);
  const loss::TrainingImage image =
      loss::load_training_image(o.image, o.labels, o.imgsz, !o.square, model.nc);
  reference::RefTensor input(1, 3, image.height, image.width);
  input.values = image.input;

  const auto start = std::chrono::steady_clock::now();
  std::string computed_by = "float64 reference backward";
  TrainingGradients g;
  if (o.backend == "reference") {
    g = training_gradients(
        reference::reference_gradients(model, input, {image.ground_truth}, loss::LossConfig{}));
  } else {
    const std::unique_ptr<Backend> backend = make_backend(o.backend, state.context());
    computed_by = "kernel backward (float32) on " + o.backend + " (" + backend->device().name + ")";
    g = kernel_gradients(*backend, model, image.input, 1, image.height, image.width, {image.ground_truth},
                         loss::LossConfig{});
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.out.empty()) write_gradients(o.out, g, location.path.string(), o.backend);

  std::cout << "model " << location.path.string() << " (" << location.origin << "), image " << o.image << " ("
            << image.width << "x" << image.height << (o.square ? " square" : " rect") << "), labels "
            << o.labels << " (" << image.ground_truth.size() << " boxes), " << computed_by << " in "
            << number(seconds) << " s\n"
            << "epoch 0 of 100: weights o2m " << number(g.weights.one2many) << ", o2o "
            << number(g.weights.one2one) << "; BatchNorm "
            << (bn == BatchNormMode::Batch ? "with batch statistics" : "frozen")
            << ", one-to-one head on detached features\n\n";
  Table table({"head", "box_loss", "cls_loss", "l1_loss", "positives"});
  for (const auto& [name, h] : {std::pair{"one2many", g.one2many}, std::pair{"one2one", g.one2one}})
    table.add({name, number(h.box), number(h.cls), number(h.l1), std::to_string(h.positives)});
  table.print(std::cout);
  std::cout << "\ntotal " << number(g.total) << "\ngradient L2 norm " << number(g.norm) << " over "
            << g.parameters.size() << " parameter tensors\n";
  if (!o.out.empty()) std::cout << "gradients written to " << o.out << "\n";
  if (o.steps > 0) run_steps(o, model, input, image.ground_truth);
}

}  // namespace

void add_grad_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand(
      "grad",
      "YOLO26 training loss of one image and d total / d every checkpoint parameter (both heads, BatchNorm "
      "frozen or, with --bn batch, normalising with the batch's statistics; the float64 reference backward, "
      "or the kernel backward with --backend cpu|cuda)");
  auto o = std::make_shared<GradOptions>();
  cmd->add_option("image", o->image, "Image file")->required();
  cmd->add_option("--labels", o->labels,
                  "YOLO labels of the image (class cx cy w h, normalised to the original image), or a "
                  "bus_loss.json-like file with labels_yolo_txt_original_image")
      ->required();
  cmd->add_option("--imgsz", o->imgsz, "Network input size")->check(imgsz_range())->capture_default_str();
  cmd->add_flag("--square", o->square, "Letterbox to imgsz x imgsz instead of the minimum rectangle");
  add_model_option(cmd, o->model);
  cmd->add_option("--out", o->out, "Write the gradients here (safetensors, float32 grad.<parameter name>)")
      ->check(not_empty());
  cmd->add_option("--steps", o->steps,
                  "Then take this many optimizer steps on the image, printing the loss before and after each")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option(
         "--optimizer", o->optimizer,
         "With --steps: auto (Ultralytics' choice for a short run: AdamW, lr fit to the class count), SGD "
         "(Nesterov) or AdamW (lr0 0.01, momentum 0.937)")
      ->check(CLI::IsMember({"auto", "SGD", "AdamW"}, CLI::ignore_case))
      ->capture_default_str();
  cmd->add_option("--bn", o->bn,
                  "frozen (the checkpoint's running statistics folded into each conv) or batch (BatchNorm in "
                  "train mode: the batch's mean and biased variance, as for training from scratch)")
      ->check(CLI::IsMember({"frozen", "batch"}))
      ->capture_default_str();
  cmd->add_option("--lr", o->lr, "With --steps: the learning rate instead of the optimizer choice's")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Examples:\n"
      "  lab grad bus.jpg --labels bus_labels.txt --square --out grads.safetensors\n"
      "  lab grad bus.jpg --labels bus_labels.txt --square --backend cuda --out grads.safetensors\n"
      "  lab grad bus.jpg --labels bus_labels.txt --square --steps 3 --optimizer SGD\n");
  cmd->add_option("--backend", o->backend,
                  "reference (the float64 reference backward), or cpu / cuda: the kernel backward on our "
                  "float32 kernels (the cpu emulator or the GPU)")
      ->check(CLI::IsMember({"reference", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->callback([o, &state] { run_grad(*o, state); });
}

}  // namespace lab
