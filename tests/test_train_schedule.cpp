// lab train's settings, learning-rate schedule and EMA (pipeline/train/train_options, lr_schedule,
// model_ema): the schedule against values worked by hand from Ultralytics' BaseTrainer formulas, the EMA
// against its decay formula on a synthetic model, and the options' one-line errors.
#include <catch2/catch.hpp>
#include <filesystem>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/train/lr_schedule.hpp"
#include "pipeline/train/model_ema.hpp"
#include "pipeline/train/train_options.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using Catch::Matchers::Contains;
using namespace lab;
using namespace lab::train;

TEST_CASE("lr schedule: warm-up and linear decay as Ultralytics", "[train_schedule]") {
  ScheduleSettings
      s;  // lr0 0.01, lrf 0.01, momentum 0.937, warm-up 3 epochs from 0.8 / 0.1, nbs 64, batch 16
  s.epochs = 10, s.batches_per_epoch = 50;
  const LrSchedule schedule(s);
  CHECK(schedule.warmup_iterations() == 150);  // max(round(3 * 50), 100)
  CHECK(schedule.lf(0) == Approx(1.0));
  CHECK(schedule.lf(5) == Approx(0.505));  // 0.5 * 0.99 + 0.01
  CHECK(schedule.lf(10) == Approx(0.01));
  CHECK(schedule.lf(12) == Approx(0.01));  // max(1 - e / epochs, 0)

  const ScheduledStep first = schedule.at(0, 0);
  CHECK(first.lr[0] == 0.0);
  CHECK(first.lr[1] == 0.0);
  CHECK(first.lr[2] == Approx(0.1));
  CHECK(first.momentum == Approx(0.8));
  CHECK(first.accumulate == 1);

  // Iteration 75 of 150 (epoch 1, batch 25): half way to lr0 * lf(1) = 0.01 * 0.901.
  const ScheduledStep half = schedule.at(1, 25);
  CHECK(half.lr[0] == Approx(0.004505));
  CHECK(half.lr[1] == Approx(0.004505));
  CHECK(half.lr[2] == Approx(0.054505));
  CHECK(half.momentum == Approx(0.8685));
  CHECK(half.accumulate == 2);  // round(2.5), half to even as numpy

  const ScheduledStep last_warm = schedule.at(3, 0);            // ni 150: the warm-up's end point
  for (double lr : last_warm.lr) CHECK(lr == Approx(0.00703));  // 0.01 * (0.7 * 0.99 + 0.01)
  CHECK(last_warm.momentum == Approx(0.937));
  CHECK(last_warm.accumulate == 4);

  const ScheduledStep after = schedule.at(7, 3);
  for (double lr : after.lr) CHECK(lr == Approx(0.00307));  // 0.01 * (0.3 * 0.99 + 0.01)
  CHECK(after.momentum == Approx(0.937));
  CHECK(after.accumulate == 4);
}

TEST_CASE("lr schedule: short runs warm up over 100 iterations, none without warm-up, AdamW keeps beta1",
          "[train_schedule]") {
  ScheduleSettings s;
  s.epochs = 3, s.batches_per_epoch = 2, s.batch = 8;
  CHECK(LrSchedule(s).warmup_iterations() == 100);
  const ScheduledStep third = LrSchedule(s).at(1, 1);  // ni 3 of 100, target 0.01 * (2/3 * 0.99 + 0.01)
  const double target = 0.01 * (2.0 / 3.0 * 0.99 + 0.01);
  CHECK(third.lr[0] == Approx(0.03 * target));
  CHECK(third.lr[2] == Approx(0.1 + 0.03 * (target - 0.1)));
  CHECK(third.accumulate == 1);  // round(1 + 0.03 * 7)

  s.warmup_momentum_applies = false, s.momentum = 0.9;
  CHECK(LrSchedule(s).at(0, 0).momentum == 0.9);

  s.warmup_epochs = 0;
  const LrSchedule plain(s);
  CHECK(plain.warmup_iterations() == -1);
  const ScheduledStep step = plain.at(0, 0);
  for (double lr : step.lr) CHECK(lr == Approx(0.01));
  CHECK(step.accumulate == 8);  // 64 / 8
}

TEST_CASE("model EMA: decay formula and one update of every tensor", "[train_schedule]") {
  CHECK(ModelEma::decay(1) == Approx(0.000499825033328626).epsilon(1e-12));
  CHECK(ModelEma::decay(2000) == Approx(0.6320573467726748).epsilon(1e-12));

  test::SyntheticModelOptions options;
  options.scale = "n", options.one2many_head = true;
  const Yolo26Model start = Yolo26Model::from_checkpoint(test::synthetic_checkpoint(options));
  Yolo26Model moved = start;
  for_each_conv(moved, [](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv))
      for (float& v : *p.values) v += 1.0f;
    if (conv.bn)
      for (float& v : conv.bn->mean) v -= 0.5f;
    fold_batchnorm(conv);
  });
  ModelEma ema(start, 1999);
  ema.update(moved);
  CHECK(ema.updates() == 2000);
  const double d = 0.6320573467726748;
  std::vector<const ConvSpec*> before, averaged;
  for_each_conv(start, [&](const ConvSpec& c) { before.push_back(&c); });
  for_each_conv(ema.model(), [&](const ConvSpec& c) { averaged.push_back(&c); });
  REQUIRE(before.size() == averaged.size());
  for (size_t i = 0; i < before.size(); ++i) {
    const ConvSpec &a = *before[i], &e = *averaged[i];
    if (e.bn) {
      CHECK(e.conv_weight[0] == Approx(a.conv_weight[0] + (1 - d)).epsilon(1e-5));
      CHECK(e.bn->gamma.back() == Approx(a.bn->gamma.back() + (1 - d)).epsilon(1e-5));
      CHECK(e.bn->mean[0] == Approx(a.bn->mean[0] - 0.5 * (1 - d)).margin(1e-5));
      ConvSpec refolded = e;
      fold_batchnorm(refolded);
      CHECK(refolded.weight == e.weight);  // the EMA's folded weights follow its parameters
    } else {
      CHECK(e.bias[0] == Approx(a.bias[0] + (1 - d)).epsilon(1e-5));
    }
  }
}

TEST_CASE("train options: defaults, ranges named, args.yaml round trip", "[train_options]") {
  TrainOptions o;
  o.data = "data.yaml";
  CHECK(o.epochs == 100);
  CHECK(o.batch == 16);
  CHECK(o.lr0 == 0.01);
  CHECK(o.momentum == 0.937);
  CHECK(o.nbs == 64);
  CHECK(o.augment.hsv_h == 0.015);
  CHECK(o.augment.mosaic == 1.0);
  CHECK(o.augment.close_mosaic == 10);
  CHECK(o.patience == 100);
  CHECK(o.warmup_bias_lr == 0.1);
  CHECK_NOTHROW(check_train_options(o));

  auto fails = [](TrainOptions bad, const std::string& message) {
    CHECK_THROWS_AS(check_train_options(bad), UsageError);
    CHECK_THROWS_WITH(check_train_options(bad), Contains(message));
  };
  TrainOptions bad = o;
  bad.epochs = 0;
  fails(bad, "--epochs 0: must be in 1..100000");
  bad = o, bad.lr0 = -1;
  fails(bad, "--lr0 -1: must be in (0, 1]");
  bad = o, bad.momentum = 1.5;
  fails(bad, "--momentum 1.5");
  bad = o, bad.optimizer = "Adam";
  fails(bad, "--optimizer Adam is not one of auto, SGD, AdamW, MuSGD");
  bad = o, bad.precision = "fp16", bad.engine = "host";
  fails(bad, "--precision fp16: 16-bit training runs on the device engine (--engine device)");
  TrainOptions half = o;
  half.precision = "bf16", half.engine = "device", half.backend = "cpu";
  CHECK_NOTHROW(check_train_options(half));
  bad = o, bad.backend = "tpu";
  fails(bad, "--backend tpu: is not one of cpu, cuda, reference");
  bad = o, bad.engine = "device", bad.backend = "reference";
  fails(bad, "--engine device: runs our kernels: --backend cpu or cuda");
  bad = o, bad.engine = "gpu";
  fails(bad, "--engine gpu: is not one of host, device");
  bad = o, bad.bn = "running";
  fails(bad, "--bn running: is not one of frozen, batch");
  for (const auto& [engine, backend] :
       {std::pair{"host", "reference"}, std::pair{"host", "cpu"}, std::pair{"host", "cuda"},
        std::pair{"device", "cpu"}, std::pair{"device", "cuda"}}) {
    TrainOptions batch_statistics = o;  // every engine and backend trains with batch statistics
    batch_statistics.bn = "batch", batch_statistics.engine = engine, batch_statistics.backend = backend;
    CHECK_NOTHROW(check_train_options(batch_statistics));
  }
  bad = o, bad.bn = "batch", bad.engine = "device", bad.backend = "cpu";
  bad.batch = 1, bad.imgsz = 32;
  fails(bad, "--bn batch: one value per channel at stride 32 (--batch 1 at --imgsz 32)");
  bad = o, bad.name = "a/b";
  fails(bad, "--name a/b: must be one folder name");
  bad = o, bad.augment.mosaic = 2;
  fails(bad, "--mosaic 2");
  bad = o, bad.data = "";
  fails(bad, "--data '': needs a dataset YAML");

  const test::ScratchDir scratch("train_options");
  const std::filesystem::path& dir = scratch.path;
  o.epochs = 7, o.lr0 = 0.002, o.name = "run x", o.exist_ok = true, o.seed = 42;
  const std::string yaml = args_yaml(o);
  CHECK_THAT(yaml, Contains("epochs: 7"));
  CHECK_THAT(yaml, Contains("warmup_bias_lr: 0.1"));
  CHECK_THAT(yaml, Contains("bn: frozen"));
  test::write_file(dir / "args.yaml", yaml);
  const TrainOptions back = read_args_yaml(dir / "args.yaml");
  CHECK(args_yaml(back) == yaml);
  CHECK(back.lr0 == 0.002);
  CHECK(back.name == "run x");
  std::string before_bn = yaml;  // a run written before --bn existed resumes with BatchNorm frozen
  before_bn.erase(before_bn.find("bn: frozen"), std::string("bn: frozen\n").size());
  test::write_file(dir / "before_bn.yaml", before_bn);
  CHECK(read_args_yaml(dir / "before_bn.yaml").bn == "frozen");

  test::write_file(dir / "short.yaml", "epochs: 3\n");
  CHECK_THROWS_WITH(read_args_yaml(dir / "short.yaml"), Contains("short.yaml: no 'data'"));
  std::string broken = yaml;
  broken.replace(broken.find("epochs: 7"), 9, "epochs: seven");
  test::write_file(dir / "bad.yaml", broken);
  CHECK_THROWS_WITH(read_args_yaml(dir / "bad.yaml"), Contains("bad.yaml:3: 'epochs' is not valid"));
}
