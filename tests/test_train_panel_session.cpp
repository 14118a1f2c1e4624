// The Train panel's state machine without its GUI (viewer/train_session): a real training run of yolo26n on
// a tiny synthetic dataset (the `lab data synth` API, 64 px, 2 classes) on the cpu emulator, driven as the
// panel drives it: start, iterations arrive with their loss components, lr and (at optimizer steps) gradient
// norms, pause holds the run (no iteration arrives while paused; an assignment asked for meanwhile is made),
// resume continues, stop ends it as `stopped` after the current iteration with its run folder written; a bad
// dataset YAML or model fails the run with its one-line message while the session stays usable; an assignment
// asked for between runs is made from the request's model.
#include <catch2/catch.hpp>

#ifdef LAB_VIEWER_BINARY

#include <chrono>
#include <functional>
#include <thread>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/dataset/synth_dataset.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"
#include "viewer/train_session.hpp"

using namespace lab;
using namespace lab::viewer;
namespace fs = std::filesystem;

namespace {

// Polls the session until `done` holds for its progress; false after `seconds`.
bool wait_for(const TrainSession& session, const std::function<bool(const TrainProgress&)>& done,
              double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done(session.progress())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A tiny dataset and a request for it: 64 px, batch 2, a step every batch (nbs = batch).
TrainRequest tiny_request(const fs::path& dir) {
  dataset::SynthOptions synth;
  synth.out = dir / "synth";
  synth.classes = 2, synth.train = 8, synth.val = 2, synth.imgsz = 64, synth.seed = 7;
  dataset::write_synth_dataset(synth);
  TrainRequest r;
  r.data_yaml = (synth.out / "data.yaml").string();
  r.model = (test::assets_dir() / "models" / "yolo26n.pt").string();
  r.epochs = 2, r.batch = 2, r.nbs = 2, r.imgsz = 64;
  r.backend = "cpu";
  r.assignment_every = 3;
  r.project = (dir / "runs").string();
  return r;
}

bool model_present() {
  if (fs::exists(test::assets_dir() / "models" / "yolo26n.pt")) return true;
  WARN("skipped: the yolo26n checkpoint is absent");
  return false;
}

}  // namespace

TEST_CASE("train session: start, iterations arrive, pause holds, resume, stop after the current iteration",
          "[train_panel]") {
  if (!model_present()) return;
  test::ScratchDir dir("train-session");
  TrainSession session(test::embedded_context());
  const TrainRequest request = tiny_request(dir.path);
  session.start(request);
  CHECK(session.progress().phase == TrainPhase::starting);
  CHECK_THROWS_AS(session.start(request), UsageError);  // one run at a time

  REQUIRE(wait_for(
      session, [](const TrainProgress& p) { return p.steps.size() >= 2; }, 300));
  TrainProgress p = session.progress();
  CHECK(p.phase == TrainPhase::running);
  CHECK(p.epochs == 2);
  CHECK_FALSE(p.log.empty());
  CHECK(fs::is_directory(p.folder));
  CHECK(p.steps[0].iteration == 0);
  CHECK(p.steps[1].iteration == 1);
  for (const TrainStepRecord& r : p.steps) {
    CHECK(r.stepped);  // nbs = batch: an optimizer step after every batch
    CHECK(r.gradient_norm > 0);
    CHECK(r.loss.one2many.sum() > 0);
    CHECK(r.loss.one2one.sum() > 0);
    // optimizer auto on a short run: AdamW, warm-up from lr 0 in every group (warmup_bias_lr 0 as well).
    for (double lr : r.lr) CHECK((r.iteration == 0 ? lr == 0 : lr > 0));
  }
  CHECK_FALSE(p.module_norms.empty());
  // The first iteration's assignment view arrives with it (from the weights after that step).
  REQUIRE(wait_for(
      session, [](const TrainProgress& q) { return q.assignment != nullptr; }, 120));
  CHECK(session.progress().assignment->weights == "after iteration 1");
  CHECK_FALSE(session.progress().assignment->view.boxes.empty());

  session.pause();
  REQUIRE(wait_for(
      session, [](const TrainProgress& q) { return q.phase == TrainPhase::paused; }, 120));
  const size_t held = session.progress().steps.size();
  const long long serial = session.progress().assignment->serial;
  session.request_assignment(request);  // made while paused
  REQUIRE(wait_for(
      session, [&](const TrainProgress& q) { return !q.assignment_pending; }, 120));
  CHECK(session.progress().assignment->serial > serial);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(session.progress().steps.size() == held);  // nothing trains while paused
  CHECK(session.progress().phase == TrainPhase::paused);

  session.resume();
  REQUIRE(wait_for(
      session, [&](const TrainProgress& q) { return q.steps.size() > held; }, 300));
  session.stop();
  REQUIRE(wait_for(
      session, [](const TrainProgress& q) { return q.phase == TrainPhase::stopped; }, 300));
  p = session.progress();
  CHECK(p.failure.empty());
  CHECK(p.steps.size() < 8);  // 2 epochs of 4 batches: stopped before the end
  CHECK(fs::exists(fs::path(p.folder) / "weights"));
}

TEST_CASE("train session: a bad dataset or model fails the run with its message, the session stays usable",
          "[train_panel]") {
  test::ScratchDir dir("train-session-bad");
  TrainSession session(test::embedded_context());
  TrainRequest request;
  request.data_yaml = (dir.path / "missing.yaml").string();
  request.project = (dir.path / "runs").string();
  session.start(request);
  REQUIRE(wait_for(
      session, [](const TrainProgress& p) { return p.phase == TrainPhase::failed; }, 60));
  const TrainProgress p = session.progress();
  CHECK(test::contains(p.failure, "missing.yaml"));
  CHECK(p.failure.find('\n') == std::string::npos);
  CHECK(p.steps.empty());
  CHECK_FALSE(fs::exists(dir.path / "runs"));  // nothing written for a run that could not start

  CHECK_THROWS_AS(session.request_assignment(TrainRequest{}), UsageError);  // no dataset

  // A good dataset with a model that is not there: failed again (a failed run can be started again), the
  // message names the model.
  TrainRequest bad_model = tiny_request(dir.path);
  bad_model.model = (dir.path / "no_such_model.pt").string();
  session.start(bad_model);
  REQUIRE(wait_for(
      session, [](const TrainProgress& q) { return q.phase == TrainPhase::failed; }, 60));
  CHECK(test::contains(session.progress().failure, "no_such_model.pt"));
  CHECK_FALSE(fs::exists(dir.path / "runs"));
}

TEST_CASE("train session: an assignment asked for between runs is made from the request's model",
          "[train_panel]") {
  if (!model_present()) return;
  test::ScratchDir dir("train-session-assign");
  TrainSession session(test::embedded_context());
  const TrainRequest request = tiny_request(dir.path);
  session.request_assignment(request);
  CHECK(session.progress().assignment_pending);
  REQUIRE(wait_for(
      session, [](const TrainProgress& p) { return !p.assignment_pending; }, 120));
  const TrainProgress p = session.progress();
  CHECK(p.assignment_failure.empty());
  REQUIRE(p.assignment != nullptr);
  CHECK(p.assignment->weights == request.model);
  CHECK(p.assignment->view.width == 64);
  CHECK(p.assignment->rgb.size() == size_t(64) * 64 * 3);
  CHECK_FALSE(p.assignment->view.boxes.empty());
  CHECK(p.assignment->view.one2many_positives > 0);
  CHECK(p.phase == TrainPhase::idle);
}

#endif
