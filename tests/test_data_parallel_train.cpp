// `lab train --devices` (issue 21) on the cpu emulator, ranks as threads: the sampler's split (disjoint,
// covering, the same count per rank) and the loaders' batches (the ranks' images together are one rank's at
// the whole batch, augmentation included); a 2-rank run against a 1-rank run at the same total batch
// (parameters within float32 reduction-order error), rank 0 alone writing and calling the hooks, an
// interrupted 2-rank run resumed exactly; with --bn batch (SyncBatchNorm) the 1-rank run's parameters and
// running statistics; --devices' and the option checks' one-line errors, on the CLI too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/dataset/data_yaml.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/safetensors.hpp"
#include "pipeline/train/data_parallel_trainer.hpp"
#include "pipeline/train/class_reinit.hpp"
#include "pipeline/train/device_list.hpp"
#include "pipeline/train/rank_shard.hpp"
#include "pipeline/train/run_folder.hpp"
#include "pipeline/train/train_loader.hpp"
#include "pipeline/train/train_state.hpp"
#include "tests/test_helpers.hpp"
#include "tests/train_run_support.hpp"

using Catch::Matchers::Contains;
using namespace lab;
using namespace lab::train;
namespace fs = std::filesystem;

namespace {

const fs::path kModel = test::shared_yolo26n_path();

// 2 epochs of 4 images, a step per batch of 4 (2 a rank), augmentation on (Ultralytics' defaults).
TrainOptions options(const fs::path& data, const fs::path& project, const std::string& devices) {
  TrainOptions o = test::plain_train_options(data, project, "cpu");
  o.epochs = 2, o.batch = 4, o.nbs = 4, o.augment = AugmentSettings{};
  o.optimizer = "SGD", o.lr0 = 0.01, o.engine = "device", o.devices = devices;
  return o;
}

using test::recording;

// The shared yolo26n is absent on a fresh clone: the runs on it skip, saying so.
bool model_absent() {
  if (fs::exists(kModel)) return false;
  WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
  return true;
}

// The trained parameters ("train/<name>") of a run's state, in for_each_conv order.
std::vector<double> trained(const fs::path& run, Yolo26Model structure) {
  const SafetensorsFile state = SafetensorsFile::load(last_state_path(run));
  std::vector<double> out;
  for_each_conv(structure, [&](ConvSpec& conv) {
    for (const ParameterRef& ref : conv_parameters(conv))
      for (float v : state.floats("train/" + ref.name)) out.push_back(v);
  });
  return out;
}

std::vector<double> flat(Yolo26Model model) {
  std::vector<double> out;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& ref : conv_parameters(conv))
      out.insert(out.end(), ref.values->begin(), ref.values->end());
  });
  return out;
}

// || got - want || / || want - start ||: two runs apart relative to the training's own movement from start.
double apart(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& start) {
  double distance = 0, moved = 0;
  for (size_t i = 0; i < want.size(); ++i)
    distance += (got[i] - want[i]) * (got[i] - want[i]), moved += (want[i] - start[i]) * (want[i] - start[i]);
  REQUIRE(moved > 0);
  return std::sqrt(distance / moved);
}

// The boxes as numbers, for comparison.
std::vector<double> boxes(const std::vector<loss::GtBox>& gts) {
  std::vector<double> out;
  for (const loss::GtBox& g : gts) out.insert(out.end(), {double(g.cls), g.x1, g.y1, g.x2, g.y2});
  return out;
}

// The model a run on `data` starts from: the checkpoint, its class branches re-initialised for the data's.
Yolo26Model starting_model(const fs::path& data, uint64_t seed) {
  Yolo26Model model = Yolo26Model::from_checkpoint(load_checkpoint(kModel));
  adopt_classes(model, dataset::read_data_yaml(data.string()).names, seed);
  return model;
}

}  // namespace

TEST_CASE("RankShard: the ranks' positions are disjoint, cover the epoch and are as many on every rank",
          "[distributed]") {
  for (size_t images = 1; images <= 11; ++images)
    for (int ranks = 1; ranks <= 4; ++ranks) {
      INFO(images << " images, " << ranks << " ranks");
      std::set<size_t> positions, covered;
      for (int rank = 0; rank < ranks; ++rank) {
        const std::vector<size_t> mine = shard_positions(images, {rank, ranks});
        CHECK(mine.size() == (images + size_t(ranks) - 1) / size_t(ranks));
        for (size_t p : mine) {
          CHECK(p % size_t(ranks) == size_t(rank));
          CHECK(positions.insert(p).second);  // no position taken twice
          covered.insert(p % images);
        }
      }
      CHECK(covered.size() == images);  // every image
      CHECK(positions.size() ==
            shard_images(images, ranks) * size_t(ranks));  // padded to a multiple of ranks
      CHECK(*positions.rbegin() == positions.size() - 1);  // the positions 0 .. padded - 1
    }
  CHECK_THROWS_WITH(shard_positions(4, {2, 2}), "rank 2 of 2: not a rank of the run");
}

TEST_CASE("TrainLoader shards: 2 ranks' batches are 1 rank's at the whole batch, augmented alike",
          "[distributed]") {
  const test::ScratchDir scratch("dp_loader");
  const dataset::DataConfig data =
      dataset::read_data_yaml(test::synth_train_dataset(scratch.path, 5, 32, 3).string());
  const dataset::Split split = dataset::read_split(data, "train");
  const AugmentSettings augment;  // Ultralytics' defaults: mosaic, affine, HSV, flip
  TrainLoader one(split, 32, 2, augment, 0, 7);
  TrainLoader rank0(split, 32, 1, augment, 0, 7, {0, 2}), rank1(split, 32, 1, augment, 2, 7, {1, 2});
  CHECK(one.batches_per_epoch() == 3);
  for (TrainLoader* r : {&rank0, &rank1}) CHECK(r->batches_per_epoch() == 3);  // 5 images padded to 6
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (TrainLoader* l : {&one, &rank0, &rank1}) l->start_epoch(epoch, 2);
    for (int k = 0; k < 3; ++k) {
      const TrainBatch whole = *one.next(), a = *rank0.next(), b = *rank1.next();
      INFO("epoch " << epoch << " batch " << k);
      REQUIRE(a.batch == 1);
      REQUIRE(b.batch == 1);
      const size_t bytes = a.pixels.size();
      CHECK(std::equal(a.pixels.begin(), a.pixels.end(), whole.pixels.begin()));
      CHECK(boxes(whole.ground_truth[0]) == boxes(a.ground_truth[0]));
      if (k < 2) {  // the last position of the padded epoch repeats the shuffle's first image
        CHECK(std::equal(b.pixels.begin(), b.pixels.end(), whole.pixels.begin() + long(bytes)));
        CHECK(whole.files[1] == b.files[0]);
      }
    }
    CHECK_FALSE(rank1.next());
  }
}

TEST_CASE("lab train --devices 0,1 (cpu): the 1-rank run's parameters, rank 0 alone writes, resume",
          "[distributed]") {
  if (model_absent()) return;
  const test::ScratchDir scratch("dp_train");
  const fs::path data = test::synth_train_dataset(scratch.path, 4, 32, 11), runs = scratch.path / "runs";
  TrainOptions single = options(data, runs, ""), split = options(data, runs, "0,1");
  single.name = "single", split.name = "split";

  test::RecordedRun one, two;
  const Yolo26Model structure = starting_model(data, single.seed);
  const std::vector<double> start = flat(structure);
  DataParallelTrainer(single, std::nullopt, test::embedded_context(), recording(one)).run();
  DataParallelTrainer split_run(split, std::nullopt, test::embedded_context(), recording(two));
  CHECK(split_run.ranks() == 2);
  CHECK_THAT(split_run.description()[3],
             Contains("data-parallel over 2 ranks (devices 0,1), 2 images a rank"));
  const TrainSummary summary = split_run.run();
  CHECK(summary.epochs_done == 2);

  // The hooks: rank 0's alone, each step once, with the whole batch's loss.
  REQUIRE(two.steps.size() == one.steps.size());
  REQUIRE(two.steps.size() == 2);
  CHECK(two.epochs.size() == 2);
  for (size_t i = 0; i < one.steps.size(); ++i) {
    CHECK(two.steps[i].loss.total == Approx(one.steps[i].loss.total).epsilon(1e-6));
    CHECK(two.steps[i].grad_norm == Approx(one.steps[i].grad_norm).epsilon(1e-5));
  }
  // Parameters: float32 reduction order apart, relative to the update (test_data_parallel_engine's SGD bar).
  const std::vector<double> a = trained(runs / "single", structure), b = trained(runs / "split", structure);
  const double error = apart(b, a, start);
  WARN("lab train, 2 ranks vs 1: parameters apart by " << error << " of the update");
  CHECK(error <= 1e-4);

  // Rank 0 alone wrote: one folder for the split run, with the devices in its args.yaml.
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(runs)) folders.insert(entry.path().filename().string());
  CHECK(folders == std::set<std::string>{"single", "split"});
  CHECK(read_args_yaml(runs / "split" / "args.yaml").devices == "0,1");
  CHECK(fs::exists(runs / "split" / "weights" / "last.safetensors"));

  // Stopped after its first step and resumed (every rank from the same state): the uninterrupted run's end.
  TrainOptions cut = split;
  cut.name = "cut";
  test::RecordedRun first, rest;
  CHECK(DataParallelTrainer(cut, std::nullopt, test::embedded_context(), recording(first, 1))
            .run()
            .interrupted);
  DataParallelTrainer resumed(TrainOptions{}, (runs / "cut").string(), test::embedded_context(),
                              recording(rest));
  CHECK(resumed.ranks() == 2);
  resumed.run();
  REQUIRE(rest.steps.size() == 1);
  CHECK(rest.steps[0].loss.total == two.steps[1].loss.total);
  const bool resumed_exactly = trained(runs / "cut", structure) == b;  // (not expanded: 2.6M values)
  CHECK(resumed_exactly);
}

TEST_CASE(
    "lab train --devices 0,1 (cpu): a batch an undecodable image leaves empty on one rank is passed over by "
    "both, each image's warning told once, rank 1's as such",
    "[distributed]") {
  if (model_absent()) return;
  const test::ScratchDir scratch("dp_undecodable");
  const fs::path data = test::synth_train_dataset(scratch.path, 4, 32, 11);
  // One image decodes: every batch (one image a rank) has an empty rank, and rank 1 holds at least one of the
  // three that do not decode. Before, the rank with the empty batch went on to the next one alone, and the
  // ranks' collectives no longer matched ("broadcast_host of 1 values, but rank 1 gave 3").
  for (const char* name : {"000000.jpg", "000001.jpg", "000003.jpg"})
    test::write_file(scratch.path / "data" / "images" / "train" / name, "not a JPEG");
  TrainOptions o = options(data, scratch.path / "runs", "0,1");
  o.epochs = 1, o.batch = 2, o.nbs = 2, o.augment = AugmentSettings::none();  // no mosaic: its own image only
  test::RecordedRun run;
  TrainHooks hooks = recording(run);
  std::vector<std::string> logged;
  hooks.log = [&](const std::string& line) { logged.push_back(line); };
  const TrainSummary summary = DataParallelTrainer(o, std::nullopt, test::embedded_context(), hooks).run();
  CHECK(summary.epochs_done == 1);
  CHECK(run.steps.empty());
  std::map<std::string, int> told;  // file -> warnings naming it
  int from_rank_one = 0;
  for (const std::string& line : logged) {
    INFO(line);
    CHECK((line.rfind("warning: ", 0) == 0 || line.rfind("rank 1: warning: ", 0) == 0));
    CHECK_THAT(line, Contains(": cannot read image") && Contains("(corrupt: image skipped)"));
    ++told[fs::path(line.substr(0, line.find(": cannot read image"))).filename().string()];
    from_rank_one += line.rfind("rank 1: ", 0) == 0;
  }
  CHECK(told == std::map<std::string, int>{{"000000.jpg", 1}, {"000001.jpg", 1}, {"000003.jpg", 1}});
  CHECK(from_rank_one >= 1);
}

TEST_CASE("lab train --bn batch on 2 cpu ranks: SyncBatchNorm gives the 1-rank run's parameters and running "
          "statistics",
          "[distributed]") {
  if (model_absent()) return;
  const test::ScratchDir scratch("dp_train_bn");
  const fs::path data = test::synth_train_dataset(scratch.path, 4, 64, 13), runs = scratch.path / "runs";
  std::map<std::string, TrainState> states;
  const Yolo26Model structure = starting_model(data, options(data, runs, "").seed);
  for (const std::string devices : {"", "0,1"}) {  // one step of 4 images at 64x64, 2 a rank
    TrainOptions o = options(data, runs, devices);
    o.name = devices.empty() ? "single" : "split", o.epochs = 1, o.imgsz = 64, o.bn = "batch";
    test::RecordedRun run;
    DataParallelTrainer(o, std::nullopt, test::embedded_context(), recording(run)).run();
    REQUIRE(run.steps.size() == 1);
    states.emplace(o.name, load_train_state(last_state_path(runs / o.name), structure));
  }
  // test_data_parallel_engine's SyncBatchNorm bars: 1e-3 of the update, 1e-4 of the running statistics'
  // movement (its unsynchronised control is 1.4 and 0.40 away).
  const TrainState &one = states.at("single"), &two = states.at("split");
  const double parameters = apart(flat(two.model), flat(one.model), flat(structure));
  const double running = apart(test::running_statistics(two.model), test::running_statistics(one.model),
                               test::running_statistics(structure));
  WARN("lab train --bn batch, 2 ranks vs 1: parameters apart by " << parameters << " of the update, running "
                                                                   << "statistics by " << running);
  CHECK(parameters <= 1e-3);
  CHECK(running <= 1e-4);
}

TEST_CASE("lab train --master on one GPU: one node of one rank over NCCL gives the plain run's parameters",
          "[distributed][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  if (model_absent()) return;
  const test::ScratchDir scratch("dp_train_master");
  const fs::path data = test::synth_train_dataset(scratch.path, 4, 32, 17), runs = scratch.path / "runs";
  TrainOptions plain = options(data, runs, "0"), node = options(data, runs, "0");
  plain.backend = node.backend = "cuda";
  plain.name = "plain", node.name = "node";
  node.master = "127.0.0.1:29517", node.nnodes = 1, node.node_rank = 0;
  test::RecordedRun one, two;
  DataParallelTrainer(plain, std::nullopt, test::embedded_context(), recording(one)).run();
  DataParallelTrainer through_nccl(node, std::nullopt, test::embedded_context(), recording(two));
  CHECK(through_nccl.ranks() == 1);
  CHECK(through_nccl.run().epochs_done == 2);
  REQUIRE(two.steps.size() == one.steps.size());
  // A world of one: every all-reduce is the identity, so only float32 rounding can part them (the SGD bar).
  const Yolo26Model structure = starting_model(data, plain.seed);
  const double error = apart(trained(runs / "node", structure), trained(runs / "plain", structure), flat(structure));
  WARN("lab train --master 127.0.0.1:29517 --nnodes 1 on one GPU: parameters apart by " << error
                                                                                        << " of the update");
  CHECK(error <= 1e-4);
}

TEST_CASE("the --devices option: bad lists, missing devices and inconsistent options are one-line errors",
          "[distributed]") {
  CHECK(device_list("", "cpu", 0).empty());
  CHECK(device_list("0,1", "cpu", 0) == std::vector<int>{0, 1});
  CHECK(device_list("1,0", "cpu", 0) == std::vector<int>{1, 0});
  CHECK(device_list("all", "cuda", 3) == std::vector<int>{0, 1, 2});
  CHECK(device_list("1", "cuda", 2) == std::vector<int>{1});
  for (const auto& [devices, backend, gpus, message] :
       std::vector<std::tuple<std::string, std::string, int, std::string>>{
           {"0,0", "cpu", 0, "--devices 0,0: device 0 is listed twice"},
           {"0,1,1", "cuda", 2, "--devices 0,1,1: device 1 is listed twice"},
           {"5", "cuda", 1, "--devices 5: no CUDA device 5 (this machine has 1)"},
           {"5", "cpu", 0, "--devices 5: the cpu emulator's 1 rank(s) are devices 0..0"},
           {"all", "cpu", 0, "--devices all: every CUDA GPU, but --backend cpu has none"},
           {"0,", "cpu", 0, "--devices 0,: '' is not a device number"},
           {"a,b", "cpu", 0, "--devices a,b: 'a' is not a device number"},
           {"-1", "cuda", 1, "--devices -1: '-1' is not a device number"},
           {"0,1", "reference", 0, "--devices 0,1: the reference backend trains on one rank"}}) {
    INFO(devices << " on " << backend);
    CHECK_THROWS_WITH(device_list(devices, backend, gpus), Contains(message));
  }
  TrainOptions o;
  o.data = "data.yaml", o.backend = "cpu", o.engine = "device", o.devices = "0,1", o.batch = 4;
  CHECK_NOTHROW(check_train_options(o));
  o.batch = 5;
  CHECK_THROWS_WITH(check_train_options(o),
                    "--batch 5: the total batch does not divide over 2 ranks (--devices 0,1)");
  o.batch = 4, o.engine = "host";
  CHECK_THROWS_WITH(check_train_options(o),
                    "--engine host: data-parallel training (--devices 0,1) runs the device engine");
  o.engine = "device", o.bn = "batch";  // synchronised over the ranks (SyncBatchNorm)
  CHECK_NOTHROW(check_train_options(o));
  o.bn = "frozen", o.backend = "cuda", o.devices = "", o.nnodes = 2, o.node_rank = 1, o.master = "host0:29500";
  CHECK_NOTHROW(check_node_options(o));
  o.batch = 6;  // 2 nodes of one rank: the total batch divides
  CHECK_NOTHROW(check_train_options(o));
  o.batch = 5;
  CHECK_THROWS_WITH(check_train_options(o),
                    "--batch 5: the total batch does not divide over 2 ranks (one device x --nnodes 2)");
}

TEST_CASE("lab train / bench train-step --devices and the multi-host flags (CLI): bad values are one line and "
          "exit 2, nothing written",
          "[distributed]") {
  const test::ScratchDir scratch("dp_cli");
  const fs::path data = test::synth_train_dataset(scratch.path, 2, 32, 5);
  const std::string train = "train " + test::quoted(data.string()) + " --imgsz 32 --project " +
                            test::quoted((scratch.path / "runs").string());
  const std::string common = train + " --backend cpu";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --devices 0,0", "--devices 0,0: device 0 is listed twice"},
           {" --devices 5", "--devices 5: the cpu emulator's 1 rank(s) are devices 0..0"},
           {" --devices 0,1 --batch 3", "--batch 3: the total batch does not divide over 2 ranks"},
           {" --devices 0,1 --engine host",
            "--engine host: data-parallel training (--devices 0,1) runs the device engine"}}) {
    test::check_usage_error(common + args, message);
  }
  CHECK_FALSE(fs::exists(scratch.path / "runs"));
  // The multi-host flags: cpu ranks are threads of one process; bad node numbers; on cuda (checked before a
  // backend is made, so without a GPU too) both rendezvous, a port out of range, a missing folder.
  const std::string cuda = train + " --backend cuda";
  const std::string folder = (scratch.path / "rendezvous").string();
  fs::create_directories(folder);
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {common + " --master 127.0.0.1:29500",
            "--master 127.0.0.1:29500: multi-host training runs on --backend cuda (NCCL); the cpu backend's "
            "ranks are threads of one process"},
           {common + " --rendezvous id --nnodes 2",
            "--rendezvous id: multi-host training runs on --backend cuda (NCCL); the cpu backend's ranks are "
            "threads of one process"},
           {common + " --nnodes 2", "--nnodes 2: the nodes meet through --rendezvous FILE or --master HOST:PORT"},
           {common + " --nnodes 0", "--nnodes 0: must be in 1..4096"},
           {common + " --nnodes 2 --node-rank 2 --master host0:29500", "--node-rank 2: must be in 0..1 (--nnodes 2)"},
           {common + " --node-rank -1", "--node-rank -1: must be in 0..0 (--nnodes 1)"},
           {cuda + " --nnodes 2 --master host0:70000",
            "--master 'host0:70000': expected host:port with a port from 1 to 65535"},
           {cuda + " --nnodes 2 --master host0", "--master 'host0': expected host:port with a port from 1 to 65535"},
           {cuda + " --nnodes 2 --rendezvous " + test::quoted(folder + "/id") + " --master host0:29500",
            "--rendezvous and --master: give one of them, not both"},
           {cuda + " --nnodes 2 --rendezvous " + test::quoted(folder + "/no/id"),
            "--rendezvous " + folder + "/no/id: the folder " + folder + "/no does not exist"},
           {cuda + " --engine host --master host0:29500",
            "--master host0:29500: multi-host training runs the device engine"}}) {
    test::check_usage_error(args, message);
  }
  CHECK_FALSE(fs::exists(scratch.path / "runs"));
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"bench train-step --backend cpu --devices 0,0", "--devices 0,0: device 0 is listed twice"},
           {"bench pipeline --backend cpu --devices 0,1",
            "--devices 0,1: only train-step runs on several devices"}}) {
    test::check_usage_error(args, message);
  }
}
