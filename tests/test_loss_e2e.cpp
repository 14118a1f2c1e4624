// Yolo26Loss end to end on random problems: the float64 reference's gradients against central finite
// differences, the host assigner against the reference's dense assigner, and the kernel-dispatching loss
// against the reference on the cpu backend and (tagged [gpu]) on cuda.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/compare.hpp"
#include "kernels/loss/host_assigner.hpp"
#include "pipeline/loss/loss_reference.hpp"
#include "pipeline/loss/yolo26_loss.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using namespace lab::loss;

namespace {

// A 64x64 input (A = 64 + 16 + 4 = 84 anchors; 64 x `width` when given), `classes` classes, a few boxes per
// image of which one is thinner than 8 px (STAL widening). Distances in [0.3, 3) grid units put predictions
// near the boxes, so most gts get positives; logits in [-4, 2).
LossBatch random_batch(uint64_t seed, int images = 2, int classes = 4, int boxes_per_image = 3,
                       int width = 64) {
  LossBatch batch;
  batch.batch = images;
  batch.num_classes = classes;
  batch.image_height = 64, batch.image_width = width;
  batch.anchors = make_anchor_grid(64, width);
  const size_t a = batch.anchors.size();
  for (auto [head, label] : {std::pair{&batch.one2many, "o2m"}, std::pair{&batch.one2one, "o2o"}}) {
    head->boxes = random_uniform(images * 4 * a, 0.3f, 3.0f, derive_seed(seed, std::string(label) + "boxes"));
    head->scores =
        random_uniform(images * classes * a, -4.0f, 2.0f, derive_seed(seed, std::string(label) + "scores"));
  }
  const std::vector<float> u =
      random_uniform(images * boxes_per_image * 5, 0.0f, 1.0f, derive_seed(seed, "gt"));
  for (int b = 0; b < images; ++b) {
    std::vector<GtBox> gts;
    for (int g = 0; g < boxes_per_image; ++g) {
      const float* r = &u[(b * boxes_per_image + g) * 5];
      const double w = g == 0 ? 3 + 4 * r[0] : 10 + 30 * r[0], h = 10 + 30 * r[1];
      const double x1 = r[2] * (width - w), y1 = r[3] * (64 - h);
      gts.push_back({static_cast<int>(r[4] * classes) % classes, x1, y1, x1 + w, y1 + h});
    }
    batch.ground_truth.push_back(gts);
  }
  return batch;
}

double rel_l2(const std::vector<double>& out, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i)
    diff += (out[i] - ref[i]) * (out[i] - ref[i]), norm += ref[i] * ref[i];
  return std::sqrt(diff / norm);
}

void check_close(double out, double ref, double rel, const std::string& what) {
  INFO(what << ": " << out << " vs reference " << ref);
  CHECK(std::abs(out - ref) <= rel * std::abs(ref) + 1e-12);
}

void compare_with_reference(Backend& backend, uint64_t seed, LossPath path, int images = 2, int width = 64) {
  INFO("seed " << seed << ", " << loss_path_name(path) << " path, batch " << images << ", 64x" << width);
  const LossBatch batch = random_batch(seed, images, 4, 3, width);
  LossConfig config;
  config.epoch = 3, config.epochs = 10;
  const LossResult out = Yolo26Loss(backend, config, path).compute(batch);
  const LossResultT<double> ref = reference_loss(batch, config);
  REQUIRE(ref.one2many.positives > 0);
  REQUIRE(ref.one2one.positives > 0);
  CHECK(out.one2many.positives == ref.one2many.positives);
  CHECK(out.one2one.positives == ref.one2one.positives);
  // Tolerance 1e-5: float32 kernels summed in float64 against a float64 reference.
  for (auto [o, r, name] : {std::tuple{out.one2many, ref.one2many, "one2many"},
                            std::tuple{out.one2one, ref.one2one, "one2one"}}) {
    check_close(o.box, r.box, 1e-5, std::string(name) + " box");
    check_close(o.cls, r.cls, 1e-5, std::string(name) + " cls");
    check_close(o.l1, r.l1, 1e-5, std::string(name) + " l1");
    check_close(o.target_score_sum, r.target_score_sum, 1e-9, std::string(name) + " target score sum");
  }
  check_close(out.total, ref.total, 1e-5, "total");
  const Tolerance tol{1e-5, 1e-6};
  for (auto [o, r, name] : {std::tuple{&out.d_one2many, &ref.d_one2many, "d_one2many"},
                            std::tuple{&out.d_one2one, &ref.d_one2one, "d_one2one"}}) {
    const OutputCheck boxes = make_check(std::string(name) + ".boxes", {}, o->boxes, r->boxes, tol, false);
    const OutputCheck scores =
        make_check(std::string(name) + ".scores", {}, o->scores, r->scores, tol, false);
    INFO(boxes.output << " rel_l2 " << boxes.metrics.rel_l2 << " max_abs " << boxes.metrics.max_abs);
    INFO(scores.output << " rel_l2 " << scores.metrics.rel_l2 << " max_abs " << scores.metrics.max_abs);
    CHECK(boxes.pass);
    CHECK(scores.pass);
  }
}

}  // namespace

TEST_CASE("loss epoch schedule: o2m 0.8 -> 0.1 linearly, o2o = 1 - o2m", "[loss_e2e]") {
  CHECK(epoch_weights(0, 100).one2many == Approx(0.8));
  CHECK(epoch_weights(0, 100).one2one == Approx(0.2));
  CHECK(epoch_weights(99, 100).one2many == Approx(0.1));
  CHECK(epoch_weights(150, 100).one2many == Approx(0.1));
  CHECK(epoch_weights(33, 100).one2many == Approx(0.8 - 0.7 * 33 / 99.0));
  CHECK(epoch_weights(5, 1).one2many == Approx(0.1));
  CHECK_THROWS_AS(epoch_weights(-1, 10), UsageError);
}

TEST_CASE("loss reference gradients match central finite differences (64x64, detached terms fixed)",
          "[loss_e2e]") {
  for (uint64_t seed : {1u, 2u}) {
    INFO("seed " << seed);
    const LossBatch batch = random_batch(seed);
    const LossConfig config;
    for (auto [head, settings] :
         {std::pair{&batch.one2many, config.one2many}, std::pair{&batch.one2one, config.one2one}}) {
      ReferenceHead x = to_reference(*head);
      const ReferenceDetached detached = reference_detached(batch, x, settings);
      REQUIRE(detached.positives > 0);
      const double scale = 1.7;  // any grad_scale: the gradient is of scale * (box + cls + l1)
      const ReferenceHeadResult analytic = reference_head_loss(batch, x, detached, config, scale);
      const double h = 1e-6;
      for (auto [values, grads] :
           {std::pair{&x.boxes, &analytic.gradient.boxes}, std::pair{&x.scores, &analytic.gradient.scores}}) {
        std::vector<double> fd(values->size());
        for (size_t i = 0; i < values->size(); ++i) {
          const double keep = (*values)[i];
          (*values)[i] = keep + h;
          const double up = reference_head_loss(batch, x, detached, config, scale).loss.sum();
          (*values)[i] = keep - h;
          const double down = reference_head_loss(batch, x, detached, config, scale).loss.sum();
          (*values)[i] = keep;
          fd[i] = scale * (up - down) / (2 * h);
        }
        // Central differences in float64 at h = 1e-6: truncation ~h^2, rounding ~1e-16 / h.
        CHECK(rel_l2(*grads, fd) < 1e-6);
      }
    }
  }
}

TEST_CASE("host assigner agrees with the reference's dense assigner", "[loss_e2e]") {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    const LossBatch batch = random_batch(seed, 2, 4, 4);
    const size_t a = batch.anchors.size();
    for (auto [head, settings] : {std::pair{&batch.one2many, LossConfig{}.one2many},
                                  std::pair{&batch.one2one, LossConfig{}.one2one}}) {
      const ReferenceDetached ref = reference_detached(batch, to_reference(*head), settings);
      for (int b = 0; b < batch.batch; ++b) {
        const ImageHead image{head->boxes.data() + b * 4 * a, head->scores.data() + b * batch.num_classes * a,
                              batch.num_classes};
        std::vector<int> gt(a, -1);
        std::vector<double> score(a, 0.0);
        for (const Positive& p : assign_image(batch.anchors, image, batch.ground_truth[b], settings))
          gt[p.anchor] = p.gt, score[p.anchor] = p.score;
        CHECK(gt == ref.gt_of_anchor[b]);
        for (size_t i = 0; i < a; ++i) CHECK(score[i] == Approx(ref.target_score[b][i]).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("Yolo26Loss on the cpu backend matches the float64 reference", "[loss_e2e]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (uint64_t seed : {1u, 2u, 3u})
    for (LossPath path : {LossPath::device, LossPath::host}) compare_with_reference(*backend, seed, path);
  compare_with_reference(*backend, 4, LossPath::device, 5);
  // A rectangular input: the L1 term's x terms scale by the width, y terms by the height.
  for (LossPath path : {LossPath::device, LossPath::host}) compare_with_reference(*backend, 5, path, 2, 160);
}

TEST_CASE("Yolo26Loss on cuda matches the float64 reference", "[loss_e2e][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u})
    for (LossPath path : {LossPath::device, LossPath::host}) compare_with_reference(*backend, seed, path);
  compare_with_reference(*backend, 6, LossPath::device, 8);
}

TEST_CASE("Yolo26Loss device path: gradients stay in device buffers and match compute()", "[loss_e2e]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const LossBatch batch = random_batch(7, 3);
  const Yolo26Loss loss(*backend);
  const DeviceBuffer o2m_boxes = backend->upload_vector(batch.one2many.boxes);
  const DeviceBuffer o2m_scores = backend->upload_vector(batch.one2many.scores);
  const DeviceBuffer o2o_boxes = backend->upload_vector(batch.one2one.boxes);
  const DeviceBuffer o2o_scores = backend->upload_vector(batch.one2one.scores);
  const DeviceLossBatch on_device{batch.batch,
                                  batch.num_classes,
                                  batch.image_height,
                                  batch.image_width,
                                  {&o2m_boxes, &o2m_scores},
                                  {&o2o_boxes, &o2o_scores},
                                  batch.ground_truth};
  DeviceLossResult device = loss.compute_device(on_device);
  const LossResult host = Yolo26Loss(*backend, LossConfig{}, LossPath::host).compute(batch);
  CHECK(device.one2many.positives == host.one2many.positives);
  CHECK(device.one2one.positives == host.one2one.positives);
  check_close(device.total, host.total, 1e-6, "total");
  // A second call into the same result reuses its buffers and the loss's workspaces, and gives the same.
  const void* kept = device.d_one2one_scores.get();
  const double first_total = device.total;
  loss.compute_device_into(on_device, device);
  CHECK(device.d_one2one_scores.get() == kept);
  CHECK(device.total == first_total);
  CHECK_THROWS_WITH(loss.finish_device(device), "loss: finish_device without a launch_device_into before it");
  const Tolerance tol{1e-5, 1e-6};
  for (auto [buffer, ref, name] :
       {std::tuple{&device.d_one2many_boxes, &host.d_one2many.boxes, "d_one2many.boxes"},
        std::tuple{&device.d_one2many_scores, &host.d_one2many.scores, "d_one2many.scores"},
        std::tuple{&device.d_one2one_boxes, &host.d_one2one.boxes, "d_one2one.boxes"},
        std::tuple{&device.d_one2one_scores, &host.d_one2one.scores, "d_one2one.scores"}}) {
    const std::vector<float> out = backend->download_vector<float>(*buffer, ref->size());
    const OutputCheck c =
        make_check(name, {}, out, std::vector<double>(ref->begin(), ref->end()), tol, false);
    INFO(name << " rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs);
    CHECK(c.pass);
  }
  const DeviceBuffer short_scores = backend->alloc_array<float>(o2o_scores.bytes() / sizeof(float) - 1);
  DeviceLossBatch wrong = on_device;
  wrong.one2one.scores = &short_scores;
  CHECK_THROWS_AS(loss.compute_device(wrong), UsageError);  // one score short
  wrong.one2one.scores = &o2o_scores;
  wrong.ground_truth.pop_back();
  CHECK_THROWS_AS(loss.compute_device(wrong), UsageError);

  // More gts per image than the kept workspace holds (3): it grows, and the result still matches the host;
  // launched after a launch that was never finished (whose sums' copy the growth must not free under).
  const LossBatch crowded = random_batch(8, 3, 4, 6);
  const DeviceBuffer boxes_m = backend->upload_vector(crowded.one2many.boxes);
  const DeviceBuffer scores_m = backend->upload_vector(crowded.one2many.scores);
  const DeviceBuffer boxes_o = backend->upload_vector(crowded.one2one.boxes);
  const DeviceBuffer scores_o = backend->upload_vector(crowded.one2one.scores);
  loss.launch_device_into(on_device, device);
  loss.compute_device_into({crowded.batch,
                            crowded.num_classes,
                            crowded.image_height,
                            crowded.image_width,
                            {&boxes_m, &scores_m},
                            {&boxes_o, &scores_o},
                            crowded.ground_truth},
                           device);
  const LossResult crowded_host = Yolo26Loss(*backend, LossConfig{}, LossPath::host).compute(crowded);
  CHECK(device.one2many.positives == crowded_host.one2many.positives);
  check_close(device.total, crowded_host.total, 1e-6, "crowded total");
}

TEST_CASE("Yolo26Loss rejects inconsistent batches", "[loss_e2e]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Yolo26Loss loss(*backend);
  LossBatch batch = random_batch(1);
  batch.one2one.scores.pop_back();
  CHECK_THROWS_AS(loss.compute(batch), UsageError);
  batch = random_batch(1);
  batch.ground_truth[0][0].cls = 4;
  CHECK_THROWS_AS(loss.compute(batch), UsageError);
  batch = random_batch(1);
  batch.ground_truth.pop_back();
  CHECK_THROWS_AS(loss.compute(batch), UsageError);
}
