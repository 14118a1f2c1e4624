// The reference forward on a random-weight yolo26s (nc 3, no one-to-many head) at 64x96: every tensor the
// Network exposes has the right shape and is finite, the detections are well formed, a batch of two images
// gives each image exactly its batch-1 result, and bad input sizes are UsageErrors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/compare.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/network.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;

namespace {

const Yolo26Model& synthetic_s_model() {
  static const Yolo26Model model =
      Yolo26Model::from_checkpoint(lab::test::synthetic_checkpoint({.scale = "s", .nc = 3, .seed = 11}));
  return model;
}

constexpr int kHeight = 64, kWidth = 96;

}  // namespace

TEST_CASE("reference forward: synthetic yolo26s at 64x96, batch 2, has finite outputs of the right shapes",
          "[reference]") {
  const Yolo26Model& model = synthetic_s_model();
  const auto net = make_reference_network(model);
  CHECK(net->executor_name() == "reference");
  const std::vector<float> input = random_uniform(2 * 3 * kHeight * kWidth, 0.0f, 1.0f, 21);
  net->forward(input.data(), 2, kHeight, kWidth);

  const std::vector<int> channels = lab::test::spec_layer_channels("s");
  for (int i = 0; i <= 22; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "layer%02d", i);
    const NamedTensor t = net->tensor(name);
    const int stride = model.layers[size_t(i)].stride;
    CAPTURE(name);
    CHECK(t.shape == std::vector<int64_t>{2, channels[size_t(i)], kHeight / stride, kWidth / stride});
    CHECK(t.values.size() == size_t(2) * channels[size_t(i)] * (kHeight / stride) * (kWidth / stride));
    CHECK(std::all_of(t.values.begin(), t.values.end(), [](float v) { return std::isfinite(v); }));
  }
  CHECK(net->tensor("input").values == input);
  const int64_t anchors = 8 * 12 + 4 * 6 + 2 * 3;
  CHECK(net->tensor("head.boxes").shape == std::vector<int64_t>{2, 4, anchors});
  CHECK(net->tensor("head.scores").shape == std::vector<int64_t>{2, 3, anchors});
  for (const std::string name : {"attn.model.10.m.0.attn", "attn.model.22.m.0.1.attn"}) {
    const NamedTensor attn = net->tensor(name);
    CAPTURE(name);
    REQUIRE(attn.shape == std::vector<int64_t>{2, 4, 6, 6});  // 4 heads over the 2x3 grid of stride 32
    for (size_t row = 0; row < attn.values.size() / 6; ++row) {
      double sum = 0;
      for (int j = 0; j < 6; ++j) sum += attn.values[row * 6 + j];
      CHECK(sum == Approx(1.0).epsilon(1e-6));
    }
  }
  // K = min(300, A) rows per image, scores sorted, classes in range, x1 <= x2 and y1 <= y2 up to rounding.
  const NamedTensor out = net->tensor("output");
  REQUIRE(out.shape == std::vector<int64_t>{2, anchors, 6});
  CHECK(net->detections() == out.values);
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < anchors; ++r) {
      const float* row = out.values.data() + (size_t(b) * anchors + r) * 6;
      CAPTURE(b, r);
      CHECK(std::all_of(row, row + 6, [](float v) { return std::isfinite(v); }));
      CHECK((row[4] >= 0 && row[4] <= 1));
      CHECK((row[5] >= 0 && row[5] < 3 && row[5] == std::floor(row[5])));
      if (r > 0) CHECK(row[4] <= row[-2]);
    }
  const auto times = net->layer_times();
  REQUIRE(times.size() == 26);
  CHECK(times.front().name == "layer00");
  CHECK(times[23].name == "layer23");
  CHECK(times.back().name == "topk");
  CHECK_THROWS_AS(net->tensor("layer23"), UsageError);
}

TEST_CASE("reference forward: each image of a batch of two gets exactly its batch-1 result", "[reference]") {
  const Yolo26Model& model = synthetic_s_model();
  const size_t image = size_t(3) * kHeight * kWidth;
  const std::vector<float> first = random_uniform(image, 0.0f, 1.0f, 31);
  const std::vector<float> second = random_uniform(image, 0.0f, 1.0f, 32);
  std::vector<float> both = first;
  both.insert(both.end(), second.begin(), second.end());

  const auto batched = make_reference_network(model);
  batched->forward(both.data(), 2, kHeight, kWidth);
  const auto single = make_reference_network(model);
  for (int b = 0; b < 2; ++b) {
    single->forward((b == 0 ? first : second).data(), 1, kHeight, kWidth);
    for (const std::string& name : single->tensor_names()) {
      const NamedTensor one = single->tensor(name), two = batched->tensor(name);
      CAPTURE(b, name);
      REQUIRE(two.shape[0] == 2);
      const size_t per_image = one.values.size();
      REQUIRE(two.values.size() == 2 * per_image);
      CHECK(std::equal(one.values.begin(), one.values.end(), two.values.begin() + b * per_image));
    }
  }
  // The two images differ all the way to the last layer, so the check above is not vacuous.
  const auto out = batched->tensor("layer22").values;
  CHECK_FALSE(std::equal(out.begin(), out.begin() + out.size() / 2, out.begin() + out.size() / 2));
}

TEST_CASE("reference forward: bad input sizes and unknown tensors are UsageErrors", "[reference]") {
  const auto net = make_reference_network(synthetic_s_model());
  CHECK_THROWS_WITH(net->tensor("layer00"), Catch::Contains("run a forward first"));
  const std::vector<float> input(3 * 64 * 80, 0.5f);
  CHECK_THROWS_WITH(net->forward(input.data(), 1, 64, 80),
                    "input 1x3x64x80: need batch >= 1 and height, width positive multiples of 32");
  CHECK_THROWS_AS(net->forward(input.data(), 0, 64, 64), UsageError);
  net->forward(input.data(), 1, 32, 32);
  CHECK(net->tensor("output").shape == std::vector<int64_t>{1, 16 + 4 + 1, 6});
  CHECK_THROWS_WITH(net->tensor("attn.model.10.attn"), "reference network: no tensor 'attn.model.10.attn'");
}
