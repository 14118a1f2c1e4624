// Yolo26Model::from_checkpoint on synthetic checkpoints: the structure derived from the weights (channels,
// repeats, block kinds, heads), BatchNorm folding, and the UsageErrors for missing keys and contradicting
// shapes. The real yolo26n.pt is covered in test_reference_forward.cpp.
#include <catch2/catch.hpp>

#include <cmath>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using lab::test::synthetic_checkpoint;
using lab::test::SyntheticModelOptions;

namespace {

// The UsageError message of building a model from `checkpoint` ("" when it builds).
std::string build_error(const Checkpoint& checkpoint) {
  try {
    Yolo26Model::from_checkpoint(checkpoint);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("model: a synthetic yolo26s without the one-to-many head builds with the spec's structure",
          "[model][reference]") {
  const Checkpoint checkpoint = synthetic_checkpoint({.scale = "s", .nc = 3});
  const Yolo26Model model = Yolo26Model::from_checkpoint(checkpoint);
  CHECK(model.scale == "s");
  CHECK(model.nc == 3);
  CHECK(model.class_names.size() == 3);
  REQUIRE(model.layers.size() == 24);
  const std::vector<int> channels = lab::test::spec_layer_channels("s");
  for (size_t i = 0; i < channels.size(); ++i) {
    CAPTURE(i);
    CHECK(model.layers[i].index == int(i));
    CHECK(model.layers[i].out_channels == channels[i]);
  }
  const std::vector<int> strides = {2,  4,  4, 8, 8, 16, 16, 32, 32, 32, 32, 16,
                                    16, 16, 8, 8, 8, 16, 16, 16, 32, 32, 32};
  for (size_t i = 0; i < strides.size(); ++i) {
    CAPTURE(i);
    CHECK(model.layers[i].stride == strides[i]);
  }
  CHECK(model.layers[12].from == std::vector<int>{-1, 6});
  CHECK(model.layers[23].from == std::vector<int>{16, 19, 22});

  using Block = C3k2BlockSpec::Kind;
  CHECK(model.layers[2].c3k2.m.size() == 1);
  CHECK(model.layers[2].c3k2.m[0].kind == Block::Bottleneck);
  CHECK(model.layers[2].c3k2.hidden == 32);  // int(128 * 0.25)
  CHECK(model.layers[6].c3k2.m[0].kind == Block::C3k);
  CHECK(model.layers[6].c3k2.m[0].c3k.m.size() == 2);
  CHECK(model.layers[22].c3k2.m[0].kind == Block::BottleneckPsa);
  CHECK(model.layers[9].sppf.shortcut);
  CHECK_FALSE(model.layers[9].sppf.cv1.silu);

  // s: C2PSA c = 256 -> 4 heads; the layer-22 block c = 256 -> max(256 // 64, 1) = 4 heads.
  const auto attentions = model.attentions();
  REQUIRE(attentions.size() == 2);
  CHECK(attentions[0]->name == "model.10.m.0.attn");
  CHECK(attentions[1]->name == "model.22.m.0.1.attn");
  for (const AttentionSpec* a : attentions) {
    CAPTURE(a->name);
    CHECK(a->dim == 256);
    CHECK(a->num_heads == 4);
    CHECK(a->head_dim == 64);
    CHECK(a->key_dim == 32);
    CHECK(a->scale == Approx(1 / std::sqrt(32.0)));
    CHECK(a->pe.groups == 256);
    CHECK(model.attention(a->name) == a);
  }
  CHECK(model.attention("model.99.attn") == nullptr);

  const DetectSpec& detect = model.layers[23].detect;
  CHECK(detect.nc == 3);
  CHECK(detect.max_det == 300);
  REQUIRE(detect.levels.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(detect.levels[i].stride == 8 << i);
    REQUIRE(detect.levels[i].box.size() == 3);
    REQUIRE(detect.levels[i].cls.size() == 5);
    CHECK(detect.levels[i].box[0].c_out == 32);   // max(16, 128 // 4, 4)
    CHECK(detect.levels[i].cls[1].c_out == 128);  // max(128, min(3, 100))
    CHECK(detect.levels[i].cls[0].groups == detect.levels[i].cls[0].c_in);
    CHECK_FALSE(detect.levels[i].box[2].silu);
    CHECK(detect.levels[i].cls[4].c_out == 3);
  }
}

TEST_CASE("model: every scale's synthetic checkpoint builds and its scale letter is derived",
          "[model][reference]") {
  for (const std::string scale : {"n", "m", "l"}) {
    CAPTURE(scale);
    const Yolo26Model model = Yolo26Model::from_checkpoint(synthetic_checkpoint({.scale = scale, .nc = 5}));
    CHECK(model.scale == scale);
    const std::vector<int> channels = lab::test::spec_layer_channels(scale);
    for (size_t i = 0; i < channels.size(); ++i) CHECK(model.layers[i].out_channels == channels[i]);
    // m and l force C3k everywhere; l doubles the repeats.
    const bool deep = scale == "l";
    CHECK(model.layers[2].c3k2.m.size() == (deep ? 2u : 1u));
    CHECK(model.layers[10].c2psa.m.size() == (deep ? 2u : 1u));
    CHECK((model.layers[2].c3k2.m[0].kind == C3k2BlockSpec::Kind::C3k) == (scale != "n"));
  }
}

TEST_CASE("model: a checkpoint with both heads builds the one-to-one and the one-to-many branches",
          "[model][reference]") {
  Checkpoint checkpoint = synthetic_checkpoint({.scale = "n", .nc = 4, .one2many_head = true});
  checkpoint.scale.push_back('n');  // as model.yaml would give it
  const Yolo26Model model = Yolo26Model::from_checkpoint(checkpoint);
  CHECK(model.scale == "n");
  const DetectSpec& detect = model.layers[23].detect;
  CHECK(detect.levels[0].box[0].name == "model.23.one2one_cv2.0.0");
  CHECK(detect.levels[2].cls[4].name == "model.23.one2one_cv3.2.2");
  REQUIRE(detect.one2many.size() == 3);
  CHECK(detect.one2many[0].box[0].name == "model.23.cv2.0.0");
  CHECK(detect.one2many[1].cls[3].name == "model.23.cv3.1.1.1");
  CHECK(detect.one2many[2].cls[4].name == "model.23.cv3.2.2");
  CHECK(detect.one2many[2].cls[4].c_out == 4);
  CHECK(detect.one2many[2].cls[4].weight == checkpoint.state_dict.at("model.23.cv3.2.2.weight").values);
  // Without them (a fused export) the one-to-many head is empty; a partial set is an error naming the key.
  const Yolo26Model one_head = Yolo26Model::from_checkpoint(synthetic_checkpoint({.scale = "n", .nc = 4}));
  CHECK(one_head.layers[23].detect.one2many.empty());
  checkpoint.state_dict.erase("model.23.cv3.1.0.1.bn.running_var");
  CHECK_THROWS_WITH(Yolo26Model::from_checkpoint(checkpoint),
                    Catch::Contains("missing tensor 'model.23.cv3.1.0.1.bn.running_var'"));
}

TEST_CASE("model: BatchNorm is folded into the convolution in float64", "[model][reference]") {
  const Checkpoint checkpoint = synthetic_checkpoint({.scale = "n", .nc = 2, .seed = 7});
  const Yolo26Model model = Yolo26Model::from_checkpoint(checkpoint);
  const ConvSpec& conv = model.layers[0].conv;
  CHECK(conv.name == "model.0");
  CHECK(conv.stride == 2);
  CHECK(conv.kernel == 3);
  CHECK(conv.silu);
  const auto& w = checkpoint.state_dict.at("model.0.conv.weight").values;
  const auto& gamma = checkpoint.state_dict.at("model.0.bn.weight").values;
  const auto& beta = checkpoint.state_dict.at("model.0.bn.bias").values;
  const auto& mean = checkpoint.state_dict.at("model.0.bn.running_mean").values;
  const auto& var = checkpoint.state_dict.at("model.0.bn.running_var").values;
  const size_t per_out = w.size() / size_t(conv.c_out);
  for (int o = 0; o < conv.c_out; ++o) {
    const double inv_std = 1.0 / std::sqrt(double(var[o]) + 1e-3);
    CHECK(conv.bias[o] == Approx(beta[o] - gamma[o] * mean[o] * inv_std).epsilon(1e-6));
    for (size_t i = 0; i < per_out; ++i)
      CHECK(conv.weight[o * per_out + i] == Approx(w[o * per_out + i] * gamma[o] * inv_std).epsilon(1e-6));
  }
  // The checkpoint's own parameters stay beside the folded ones (for gradients).
  CHECK(conv.conv_weight == w);
  REQUIRE(conv.bn);
  CHECK(conv.bn->gamma == gamma);
  CHECK(conv.bn->beta == beta);
  CHECK(conv.bn->mean == mean);
  CHECK(conv.bn->var == var);
  CHECK(conv.bn->eps == 1e-3);
  // The head's last convolutions keep their own bias.
  const ConvSpec& cls = model.layers[23].detect.levels[1].cls[4];
  CHECK(cls.bias == checkpoint.state_dict.at("model.23.one2one_cv3.1.2.bias").values);
  CHECK(cls.weight == checkpoint.state_dict.at("model.23.one2one_cv3.1.2.weight").values);
  CHECK_FALSE(cls.bn);
  CHECK(cls.conv_weight.empty());
}

TEST_CASE("model: missing tensors and contradicting shapes are UsageErrors naming file and key",
          "[model][reference]") {
  const Checkpoint good = synthetic_checkpoint({.scale = "n", .nc = 3});
  REQUIRE(build_error(good).empty());

  SECTION("a missing tensor") {
    for (const std::string key : {"model.13.m.0.cv2.conv.weight", "model.22.m.0.1.attn.pe.bn.running_var",
                                  "model.23.one2one_cv3.2.2.bias"}) {
      Checkpoint c = good;
      c.state_dict.erase(key);
      const std::string error = build_error(c);
      CAPTURE(key, error);
      CHECK(error == "synthetic-yolo26n.pt: missing tensor '" + key + "'");
    }
  }
  SECTION("a convolution that does not read its producer's channels") {
    Checkpoint c = good;
    HostTensor& w = c.state_dict.at("model.16.cv1.conv.weight");  // [64, 256, 1, 1] reads concat 15
    w.shape[1] = 128;
    w.values.resize(size_t(64 * 128));
    const std::string error = build_error(c);
    CAPTURE(error);
    CHECK(
        error ==
        "synthetic-yolo26n.pt: tensor 'model.16.cv1.conv.weight' has shape [64, 128, 1, 1] but its input has "
        "256 channels");
  }
  SECTION("a BatchNorm vector of the wrong length") {
    Checkpoint c = good;
    c.state_dict.at("model.4.cv2.bn.running_mean").shape = {2, 64};
    const std::string error = build_error(c);
    CAPTURE(error);
    CHECK(error ==
          "synthetic-yolo26n.pt: tensor 'model.4.cv2.bn.running_mean' has shape [2, 64] but the convolution "
          "has 128 "
          "output channels");
  }
  SECTION("values that do not fill the shape") {
    Checkpoint c = good;
    c.state_dict.at("model.3.conv.weight").values.pop_back();
    CHECK_THROWS_WITH(
        Yolo26Model::from_checkpoint(c),
        Catch::Contains("tensor 'model.3.conv.weight' has shape [64, 64, 3, 3] but 36863 values"));
  }
  SECTION("a C3k2 block that does not map c to c") {
    Checkpoint c = good;
    HostTensor& w = c.state_dict.at("model.2.m.0.cv2.conv.weight");  // [16, 8, 3, 3]
    w.shape[0] = 8;
    w.values.resize(size_t(8 * 8 * 9));
    for (const std::string p : {"weight", "bias", "running_mean", "running_var"}) {
      HostTensor& v = c.state_dict.at("model.2.m.0.cv2.bn." + p);
      v.shape = {8};
      v.values.resize(8);
    }
    CHECK_THROWS_WITH(Yolo26Model::from_checkpoint(c),
                      Catch::Contains("tensor 'model.2.m.0.cv2.conv.weight' has shape [8, 8, 3, 3] but"));
  }
  SECTION("a class count that contradicts the checkpoint's nc or names") {
    Checkpoint c = good;
    c.nc = 80;
    CHECK(build_error(c) ==
          "synthetic-yolo26n.pt: tensor 'model.23.one2one_cv3.0.2.weight' has shape [3, 64, 1, 1] but the "
          "checkpoint declares nc = 80");
    c = good;
    c.class_names.push_back("extra");
    CHECK_THROWS_WITH(Yolo26Model::from_checkpoint(c), Catch::Contains("but the checkpoint names 4 classes"));
  }
  SECTION("levels with different class counts") {
    Checkpoint c = good;
    c.state_dict.at("model.23.one2one_cv3.1.2.weight").shape[0] = 2;
    c.state_dict.at("model.23.one2one_cv3.1.2.weight").values.resize(2 * 64);
    c.state_dict.at("model.23.one2one_cv3.1.2.bias").shape[0] = 2;
    c.state_dict.at("model.23.one2one_cv3.1.2.bias").values.resize(2);
    CHECK_THROWS_WITH(
        Yolo26Model::from_checkpoint(c),
        Catch::Contains("tensor 'model.23.one2one_cv3.1.2.weight' has shape [2, 64, 1, 1] but"));
  }
}
