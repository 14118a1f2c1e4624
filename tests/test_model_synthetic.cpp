// Synthetic checkpoint: walks yolo26.yaml with the spec's scaling rules and writes each module's tensors
// under its Ultralytics state-dict name. BatchNorm statistics are random (not the identity) so folding is
// exercised; weights are scaled by 1/sqrt(fan_in) to keep activations finite through the depth.
#include "tests/test_model_synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace lab::test {

namespace {

struct Scale {
  double depth, width;
  int max_channels;
};

Scale scale_of(const std::string& letter) {
  static const std::map<std::string, Scale> scales = {{"n", {0.50, 0.25, 1024}},
                                                      {"s", {0.50, 0.50, 1024}},
                                                      {"m", {0.50, 1.00, 512}},
                                                      {"l", {1.00, 1.00, 512}},
                                                      {"x", {1.00, 1.50, 512}}};
  return scales.at(letter);
}

int channels(const Scale& s, int c) {
  return int(std::ceil(std::min(c, s.max_channels) * s.width / 8) * 8);
}

int repeats(const Scale& s, int n) {
  return n > 1 ? std::max(int(std::lround(n * s.depth)), 1) : n;
}

class Writer {
 public:
  Writer(Checkpoint& c, uint64_t seed) : sd_(c.state_dict), rng_(seed) {}

  void tensor(const std::string& key, std::vector<int64_t> shape, float lo, float hi) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    std::uniform_real_distribution<float> u(lo, hi);
    HostTensor t{std::move(shape), std::vector<float>(n), "F32"};
    for (float& v : t.values) v = u(rng_);
    sd_[key] = std::move(t);
  }

  // Ultralytics Conv(c1, c2, k, g): conv without bias + BatchNorm2d.
  void conv(const std::string& p, int c1, int c2, int k, int g = 1) {
    const float bound = float(std::sqrt(3.0 / (double(c1 / g) * k * k)));
    tensor(p + ".conv.weight", {c2, c1 / g, k, k}, -bound, bound);
    tensor(p + ".bn.weight", {c2}, 0.5f, 1.5f);
    tensor(p + ".bn.bias", {c2}, -0.2f, 0.2f);
    tensor(p + ".bn.running_mean", {c2}, -0.2f, 0.2f);
    tensor(p + ".bn.running_var", {c2}, 0.5f, 1.5f);
  }

  // nn.Conv2d(c1, c2, 1, bias=True).
  void conv2d(const std::string& p, int c1, int c2) {
    const float bound = float(std::sqrt(3.0 / c1));
    tensor(p + ".weight", {c2, c1, 1, 1}, -bound, bound);
    tensor(p + ".bias", {c2}, -1.0f, 1.0f);
  }

  void bottleneck(const std::string& p, int c1, int c2, double e) {
    const int hidden = int(c2 * e);
    conv(p + ".cv1", c1, hidden, 3);
    conv(p + ".cv2", hidden, c2, 3);
  }

  void psa_block(const std::string& p, int c, int heads) {
    const int head_dim = c / heads, key_dim = head_dim / 2;
    conv(p + ".attn.qkv", c, c + 2 * key_dim * heads, 1);
    conv(p + ".attn.proj", c, c, 1);
    conv(p + ".attn.pe", c, c, 3, c);
    conv(p + ".ffn.0", c, 2 * c, 1);
    conv(p + ".ffn.1", 2 * c, c, 1);
  }

  void c3k(const std::string& p, int c1, int c2) {
    const int hidden = int(c2 * 0.5);
    conv(p + ".cv1", c1, hidden, 1);
    conv(p + ".cv2", c1, hidden, 1);
    conv(p + ".cv3", 2 * hidden, c2, 1);
    for (int i = 0; i < 2; ++i) bottleneck(p + ".m." + std::to_string(i), hidden, hidden, 1.0);
  }

  void c3k2(const std::string& p, int c1, int c2, int n, bool use_c3k, double e, bool attn) {
    const int c = int(c2 * e);
    conv(p + ".cv1", c1, 2 * c, 1);
    conv(p + ".cv2", (2 + n) * c, c2, 1);
    for (int i = 0; i < n; ++i) {
      const std::string m = p + ".m." + std::to_string(i);
      if (attn) {
        bottleneck(m + ".0", c, c, 0.5);
        psa_block(m + ".1", c, std::max(c / 64, 1));
      } else if (use_c3k) {
        c3k(m, c, c);
      } else {
        bottleneck(m, c, c, 0.5);
      }
    }
  }

  void detect(const std::string& p, const std::vector<int>& ch, int nc, const std::string& box,
              const std::string& cls) {
    const int c2 = std::max({16, ch[0] / 4, 4}), c3 = std::max(ch[0], std::min(nc, 100));
    for (size_t i = 0; i < ch.size(); ++i) {
      const std::string b = p + "." + box + "." + std::to_string(i),
                        k = p + "." + cls + "." + std::to_string(i);
      conv(b + ".0", ch[i], c2, 3);
      conv(b + ".1", c2, c2, 3);
      conv2d(b + ".2", c2, 4);
      conv(k + ".0.0", ch[i], ch[i], 3, ch[i]);
      conv(k + ".0.1", ch[i], c3, 1);
      conv(k + ".1.0", c3, c3, 3, c3);
      conv(k + ".1.1", c3, c3, 1);
      conv2d(k + ".2", c3, nc);
    }
  }

 private:
  std::map<std::string, HostTensor>& sd_;
  std::mt19937_64 rng_;
};

}  // namespace

std::vector<int> spec_layer_channels(const std::string& scale) {
  const Scale s = scale_of(scale);
  const int c0 = channels(s, 64), c1 = channels(s, 128), c2 = channels(s, 256), c4 = channels(s, 512),
            c6 = channels(s, 512), c8 = channels(s, 1024);
  const int c13 = channels(s, 512), c16 = channels(s, 256), c19 = channels(s, 512), c22 = channels(s, 1024);
  return {c0,      c1,  c2,  c2,       c4,  c4,  c6,        c8,  c8,  c8,       c8, c8,
          c8 + c6, c13, c13, c13 + c4, c16, c16, c16 + c13, c19, c19, c19 + c8, c22};
}

Checkpoint synthetic_checkpoint(const SyntheticModelOptions& o) {
  const Scale s = scale_of(o.scale);
  const bool force_c3k = o.scale == "m" || o.scale == "l" || o.scale == "x";
  const std::vector<int> ch = spec_layer_channels(o.scale);
  Checkpoint c;
  c.path = "synthetic-yolo26" + o.scale + ".pt";
  c.nc = o.nc;
  for (int i = 0; i < o.nc; ++i) c.class_names.push_back("class" + std::to_string(i));
  Writer w(c, o.seed);
  auto conv_layer = [&](int layer, int c_in) {
    w.conv("model." + std::to_string(layer), c_in, ch[size_t(layer)], 3);
  };
  auto c3k2_layer = [&](int layer, int c_in, bool use_c3k, double e, int n = 2, bool attn = false) {
    w.c3k2("model." + std::to_string(layer), c_in, ch[size_t(layer)], repeats(s, n), use_c3k || force_c3k, e,
           attn);
  };
  conv_layer(0, 3);
  conv_layer(1, ch[0]);
  c3k2_layer(2, ch[1], false, 0.25);
  conv_layer(3, ch[2]);
  c3k2_layer(4, ch[3], false, 0.25);
  conv_layer(5, ch[4]);
  c3k2_layer(6, ch[5], true, 0.5);
  conv_layer(7, ch[6]);
  c3k2_layer(8, ch[7], true, 0.5);
  const int sppf_hidden = ch[8] / 2;
  w.conv("model.9.cv1", ch[8], sppf_hidden, 1);
  w.conv("model.9.cv2", 4 * sppf_hidden, ch[9], 1);
  const int psa_c = int(ch[9] * 0.5);
  w.conv("model.10.cv1", ch[9], 2 * psa_c, 1);
  w.conv("model.10.cv2", 2 * psa_c, ch[10], 1);
  for (int i = 0; i < repeats(s, 2); ++i) w.psa_block("model.10.m." + std::to_string(i), psa_c, psa_c / 64);
  c3k2_layer(13, ch[12], true, 0.5);
  c3k2_layer(16, ch[15], true, 0.5);
  conv_layer(17, ch[16]);
  c3k2_layer(19, ch[18], true, 0.5);
  conv_layer(20, ch[19]);
  c3k2_layer(22, ch[21], true, 0.5, 1, true);
  w.detect("model.23", {ch[16], ch[19], ch[22]}, o.nc, "one2one_cv2", "one2one_cv3");
  if (o.one2many_head) w.detect("model.23", {ch[16], ch[19], ch[22]}, o.nc, "cv2", "cv3");
  return c;
}

Yolo26Model synthetic_trainable_yolo26n() {
  return Yolo26Model::from_checkpoint(synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true}));
}

}  // namespace lab::test
