// `lab data synth OUT`: writes a synthetic YOLO-format dataset of coloured shapes (pipeline/dataset/
// synth_dataset.hpp) and prints what it wrote.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "lab/commands.hpp"
#include "lab/option_checks.hpp"
#include "lab/size_options.hpp"
#include "pipeline/dataset/synth_dataset.hpp"

namespace lab {

void add_data_command(CLI::App& app, CliState&) {
  auto* cmd =
      app.add_subcommand("data", "Datasets for training and validation: `synth` writes a synthetic one");
  cmd->require_subcommand(1);
  auto o = std::make_shared<dataset::SynthOptions>();
  o->threads = int(std::max(1u, std::thread::hardware_concurrency()));
  auto* synth = cmd->add_subcommand(
      "synth",
      "Write a YOLO-format dataset of coloured shapes on textured backgrounds (one class per shape)");
  synth->add_option("out", o->out, "New (or empty) folder: images/{train,val}, labels/{train,val}, data.yaml")
      ->required()
      ->check(not_empty());
  synth
      ->add_option("--classes", o->classes,
                   "Classes, one shape each: circle, square, triangle, star, hexagon, cross, diamond, ring")
      ->check(in_range(1, int(dataset::shape_names().size())))
      ->capture_default_str();
  synth->add_option("--train", o->train, "Training images")
      ->check(in_range(0, 1000000))
      ->capture_default_str();
  synth->add_option("--val", o->val, "Validation images")->check(in_range(0, 1000000))->capture_default_str();
  synth->add_option("--imgsz", o->imgsz, "Side of the square images in pixels")
      ->check(in_range(kMinImgsz, kMaxImgsz))
      ->capture_default_str();
  synth->add_option("--seed", o->seed, "Random seed (the same seed writes the same dataset)")
      ->capture_default_str();
  synth->add_option("--threads", o->threads, "Drawing threads (default: one per core)")
      ->check(in_range(1, 256));
  const char* const examples =
      "Examples:\n"
      "  lab data synth shapes --classes 3 --train 2000 --val 200 --imgsz 640 --seed 1\n"
      "  lab data synth tiny --train 16 --val 8 --imgsz 128\n";
  cmd->footer(examples);
  synth->footer(examples);
  synth->callback([o] {
    const auto start = std::chrono::steady_clock::now();
    dataset::write_synth_dataset(*o);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char line[64];
    std::snprintf(line, sizeof line, " in %.2fs", seconds);
    std::cout << "wrote " << o->train << " train + " << o->val << " val images (" << o->imgsz << "x"
              << o->imgsz << ", " << o->classes << " classes) to " << o->out.string() << line << "\n"
              << "dataset YAML: " << (o->out / "data.yaml").string() << "\n";
  });
}

}  // namespace lab
