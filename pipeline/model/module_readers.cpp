// Module builders: C3k2 blocks are told apart by key presence (a Sequential "m.<i>.0." is Bottleneck +
// PSABlock, "m.<i>.cv3." a C3k, else a Bottleneck); repeats by probing "m.<i>."; channels by weight shapes.
// num_heads cannot come from shapes (qkv always has dim + 2*key_dim*num_heads = 2*dim channels with
// attn_ratio 0.5), so it follows the spec: C2PSA c // 64, the C3k2 attention block max(c // 64, 1).
#include "pipeline/model/module_readers.hpp"

#include <algorithm>
#include <cmath>

#include "nvrtc_runtime/errors.hpp"

namespace lab::model_detail {

namespace {

std::string channels(int c) {
  return std::to_string(c) + " channels";
}

// The output channels of `conv` must equal `expected` (what the module's structure requires).
void require_out(const StateDictReader& sd, const ConvSpec& conv, int expected, const std::string& why,
                 const std::string& weight_suffix = ".conv.weight") {
  if (conv.c_out != expected)
    sd.fail_shape(conv.name + weight_suffix, why + " needs " + channels(expected) + " out");
}

}  // namespace

BottleneckSpec read_bottleneck(const StateDictReader& sd, const std::string& prefix, int c_in) {
  BottleneckSpec b;
  b.cv1 = sd.conv(prefix + ".cv1", c_in, Grouping::Dense, true);
  b.cv2 = sd.conv(prefix + ".cv2", b.cv1.c_out, Grouping::Dense, true);
  b.shortcut = b.cv2.c_out == c_in;
  return b;
}

C3kSpec read_c3k(const StateDictReader& sd, const std::string& prefix, int c_in) {
  C3kSpec c;
  c.cv1 = sd.conv(prefix + ".cv1", c_in, Grouping::Dense, true);
  c.cv2 = sd.conv(prefix + ".cv2", c_in, Grouping::Dense, true);
  const int hidden = c.cv1.c_out;
  require_out(sd, c.cv2, hidden, "C3k's cv2 (as wide as its cv1)");
  const int n = sd.count_children(prefix + ".m");
  if (n == 0) throw UsageError(sd.file() + ": missing tensor '" + prefix + ".m.0.cv1.conv.weight'");
  for (int i = 0; i < n; ++i) {
    c.m.push_back(read_bottleneck(sd, prefix + ".m." + std::to_string(i), hidden));
    require_out(sd, c.m.back().cv2, hidden, "a C3k bottleneck");
  }
  c.cv3 = sd.conv(prefix + ".cv3", 2 * hidden, Grouping::Dense, true);
  return c;
}

AttentionSpec read_attention(const StateDictReader& sd, const std::string& prefix, int dim, int num_heads) {
  AttentionSpec a;
  a.name = prefix;
  a.dim = dim;
  a.num_heads = num_heads;
  a.qkv = sd.conv(prefix + ".qkv", dim, Grouping::Dense, false);
  if (num_heads <= 0 || dim % num_heads != 0 || (dim / num_heads) % 2 != 0)
    sd.fail_shape(a.qkv.name + ".conv.weight", "Attention(dim " + std::to_string(dim) + ", " +
                                                   std::to_string(num_heads) +
                                                   " heads) needs an even head_dim = dim / num_heads");
  a.head_dim = dim / num_heads;
  a.key_dim = a.head_dim / 2;
  a.scale = float(1.0 / std::sqrt(double(a.key_dim)));
  require_out(sd, a.qkv, dim + 2 * a.key_dim * num_heads, "Attention qkv (dim + 2*key_dim*num_heads)");
  a.proj = sd.conv(prefix + ".proj", dim, Grouping::Dense, false);
  require_out(sd, a.proj, dim, "Attention proj");
  a.pe = sd.conv(prefix + ".pe", dim, Grouping::Depthwise, false);
  require_out(sd, a.pe, dim, "Attention pe");
  if (a.pe.groups != dim) sd.fail_shape(a.pe.name + ".conv.weight", "Attention pe is depthwise");
  return a;
}

PsaBlockSpec read_psa_block(const StateDictReader& sd, const std::string& prefix, int c, int num_heads) {
  PsaBlockSpec p;
  p.attn = read_attention(sd, prefix + ".attn", c, num_heads);
  p.ffn0 = sd.conv(prefix + ".ffn.0", c, Grouping::Dense, true);
  p.ffn1 = sd.conv(prefix + ".ffn.1", p.ffn0.c_out, Grouping::Dense, false);
  require_out(sd, p.ffn1, c, "PSABlock ffn (residual)");
  return p;
}

C3k2Spec read_c3k2(const StateDictReader& sd, const std::string& prefix, int c_in) {
  C3k2Spec s;
  s.cv1 = sd.conv(prefix + ".cv1", c_in, Grouping::Dense, true);
  if (s.cv1.c_out % 2 != 0) sd.fail_shape(s.cv1.name + ".conv.weight", "C3k2 splits cv1 into two halves");
  const int c = s.hidden = s.cv1.c_out / 2;
  const int n = sd.count_children(prefix + ".m");
  if (n == 0) throw UsageError(sd.file() + ": missing tensor '" + prefix + ".m.0.cv1.conv.weight'");
  for (int i = 0; i < n; ++i) {
    const std::string m = prefix + ".m." + std::to_string(i);
    C3k2BlockSpec block;
    if (sd.count_children(m) > 0) {
      block.kind = C3k2BlockSpec::Kind::BottleneckPsa;
      block.bottleneck = read_bottleneck(sd, m + ".0", c);
      require_out(sd, block.bottleneck.cv2, c, "a C3k2 block");
      block.psa = read_psa_block(sd, m + ".1", c, std::max(c / 64, 1));
    } else if (sd.has(m + ".cv3.conv.weight")) {
      block.kind = C3k2BlockSpec::Kind::C3k;
      block.c3k = read_c3k(sd, m, c);
      require_out(sd, block.c3k.cv3, c, "a C3k2 block");
    } else {
      block.kind = C3k2BlockSpec::Kind::Bottleneck;
      block.bottleneck = read_bottleneck(sd, m, c);
      require_out(sd, block.bottleneck.cv2, c, "a C3k2 block");
    }
    s.m.push_back(std::move(block));
  }
  s.cv2 = sd.conv(prefix + ".cv2", (2 + n) * c, Grouping::Dense, true);
  return s;
}

SppfSpec read_sppf(const StateDictReader& sd, const std::string& prefix, int c_in) {
  SppfSpec s;
  s.cv1 = sd.conv(prefix + ".cv1", c_in, Grouping::Dense, false);
  s.cv2 = sd.conv(prefix + ".cv2", (s.pools + 1) * s.cv1.c_out, Grouping::Dense, true);
  s.shortcut = s.cv2.c_out == c_in;
  return s;
}

C2PsaSpec read_c2psa(const StateDictReader& sd, const std::string& prefix, int c_in) {
  C2PsaSpec s;
  s.cv1 = sd.conv(prefix + ".cv1", c_in, Grouping::Dense, true);
  if (s.cv1.c_out % 2 != 0) sd.fail_shape(s.cv1.name + ".conv.weight", "C2PSA splits cv1 into two halves");
  const int c = s.hidden = s.cv1.c_out / 2;
  if (c / 64 < 1)
    sd.fail_shape(s.cv1.name + ".conv.weight", "C2PSA needs c = cv1/2 >= 64 for c // 64 attention heads");
  const int n = sd.count_children(prefix + ".m");
  if (n == 0) throw UsageError(sd.file() + ": missing tensor '" + prefix + ".m.0.attn.qkv.conv.weight'");
  for (int i = 0; i < n; ++i)
    s.m.push_back(read_psa_block(sd, prefix + ".m." + std::to_string(i), c, c / 64));
  s.cv2 = sd.conv(prefix + ".cv2", 2 * c, Grouping::Dense, true);
  return s;
}

namespace {

// One set of Detect branches ("<prefix>.<box_name>.<i>", "<prefix>.<cls_name>.<i>") over the given levels;
// every level's class branch must have `nc` outputs (0: level 0's count decides).
std::vector<DetectLevelSpec> read_detect_branches(const StateDictReader& sd, const std::string& prefix,
                                                  const std::string& box_name, const std::string& cls_name,
                                                  const std::vector<int>& level_channels,
                                                  const std::vector<int>& level_strides, int& nc) {
  std::vector<DetectLevelSpec> levels;
  for (size_t i = 0; i < level_channels.size(); ++i) {
    const int ch = level_channels[i];
    const std::string box = prefix + "." + box_name + "." + std::to_string(i);
    const std::string cls = prefix + "." + cls_name + "." + std::to_string(i);
    DetectLevelSpec level;
    level.stride = level_strides[i];
    level.box.push_back(sd.conv(box + ".0", ch, Grouping::Dense, true));
    level.box.push_back(sd.conv(box + ".1", level.box[0].c_out, Grouping::Dense, true));
    level.box.push_back(sd.plain_conv(box + ".2", level.box[1].c_out));
    require_out(sd, level.box[2], 4, "the box branch (l, t, r, b)", ".weight");
    level.cls.push_back(sd.conv(cls + ".0.0", ch, Grouping::Depthwise, true));
    level.cls.push_back(sd.conv(cls + ".0.1", level.cls[0].c_out, Grouping::Dense, true));
    level.cls.push_back(sd.conv(cls + ".1.0", level.cls[1].c_out, Grouping::Depthwise, true));
    level.cls.push_back(sd.conv(cls + ".1.1", level.cls[2].c_out, Grouping::Dense, true));
    level.cls.push_back(sd.plain_conv(cls + ".2", level.cls[3].c_out));
    if (nc == 0) nc = level.cls[4].c_out;
    require_out(sd, level.cls[4], nc, "every level's class branch (as many classes as level 0)", ".weight");
    levels.push_back(std::move(level));
  }
  return levels;
}

}  // namespace

DetectSpec read_detect(const StateDictReader& sd, const std::string& prefix,
                       const std::vector<int>& level_channels, const std::vector<int>& level_strides) {
  DetectSpec d;
  d.nc = 0;
  d.levels =
      read_detect_branches(sd, prefix, "one2one_cv2", "one2one_cv3", level_channels, level_strides, d.nc);
  if (sd.count_children(prefix + ".cv2") > 0 || sd.count_children(prefix + ".cv3") > 0)
    d.one2many = read_detect_branches(sd, prefix, "cv2", "cv3", level_channels, level_strides, d.nc);
  return d;
}

}  // namespace lab::model_detail
