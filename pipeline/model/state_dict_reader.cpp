// StateDictReader: tensor lookup with shape checks; each Conv keeps its checkpoint parameters and BatchNorm
// (eps 1e-3, the Ultralytics default; the state dict does not store eps) and is folded by fold_batchnorm.
#include "pipeline/model/state_dict_reader.hpp"

#include <numeric>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::model_detail {

namespace {

constexpr double kBatchNormEps = 1e-3;

size_t shape_elements(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= d < 0 ? 0 : size_t(d);
  return n;
}

}  // namespace

StateDictReader::StateDictReader(const Checkpoint& checkpoint)
    : checkpoint_(checkpoint), file_(checkpoint.path.empty() ? "checkpoint" : checkpoint.path.string()) {}

int StateDictReader::count_children(const std::string& prefix) const {
  int n = 0;
  for (;; ++n) {
    const std::string child = prefix + "." + std::to_string(n) + ".";
    const auto it = checkpoint_.state_dict.lower_bound(child);
    if (it == checkpoint_.state_dict.end() || it->first.compare(0, child.size(), child) != 0) return n;
  }
}

const HostTensor& StateDictReader::tensor(const std::string& key) const {
  const auto it = checkpoint_.state_dict.find(key);
  if (it == checkpoint_.state_dict.end()) throw UsageError(file_ + ": missing tensor '" + key + "'");
  if (shape_elements(it->second.shape) != it->second.values.size())
    throw UsageError(file_ + ": tensor '" + key + "' has shape " + shape_text(it->second.shape) + " but " +
                     std::to_string(it->second.values.size()) + " values");
  return it->second;
}

void StateDictReader::fail_shape(const std::string& key, const std::string& why) const {
  throw UsageError(file_ + ": tensor '" + key + "' has shape " + shape_text(tensor(key).shape) + " but " +
                   why);
}

const HostTensor& StateDictReader::weight(const std::string& key, int c_in, Grouping grouping,
                                          int& groups) const {
  const HostTensor& w = tensor(key);
  if (w.shape.size() != 4 || w.shape[0] <= 0 || w.shape[2] != w.shape[3] || w.shape[2] % 2 == 0)
    fail_shape(key, "a convolution weight is [c_out, c_in/groups, k, k] with an odd k");
  const int c_out = int(w.shape[0]);
  groups = grouping == Grouping::Dense ? 1 : std::gcd(c_in, c_out);
  if (w.shape[1] * groups != c_in)
    fail_shape(key, "its input has " + std::to_string(c_in) + " channels" +
                        (groups == 1 ? std::string() : " in " + std::to_string(groups) + " groups"));
  return w;
}

const HostTensor& StateDictReader::vector_of(const std::string& key, int length) const {
  const HostTensor& t = tensor(key);
  if (t.shape.size() != 1 || t.shape[0] != length)
    fail_shape(key, "the convolution has " + std::to_string(length) + " output channels");
  return t;
}

ConvSpec StateDictReader::conv(const std::string& prefix, int c_in, Grouping grouping, bool silu,
                               int stride) const {
  ConvSpec c;
  c.name = prefix;
  c.c_in = c_in;
  c.stride = stride;
  c.silu = silu;
  const HostTensor& w = weight(prefix + ".conv.weight", c_in, grouping, c.groups);
  c.c_out = int(w.shape[0]);
  c.kernel = int(w.shape[2]);
  FrozenBatchNorm bn;
  bn.eps = kBatchNormEps;
  bn.gamma = vector_of(prefix + ".bn.weight", c.c_out).values;
  bn.beta = vector_of(prefix + ".bn.bias", c.c_out).values;
  bn.mean = vector_of(prefix + ".bn.running_mean", c.c_out).values;
  bn.var = vector_of(prefix + ".bn.running_var", c.c_out).values;
  for (int o = 0; o < c.c_out; ++o)
    if (!(double(bn.var[o]) + kBatchNormEps > 0))
      throw UsageError(file_ + ": tensor '" + prefix + ".bn.running_var' has a value <= -eps at channel " +
                       std::to_string(o));
  c.conv_weight = w.values;
  c.bn = std::move(bn);
  fold_batchnorm(c);
  return c;
}

ConvSpec StateDictReader::plain_conv(const std::string& prefix, int c_in) const {
  ConvSpec c;
  c.name = prefix;
  c.c_in = c_in;
  c.silu = false;
  const HostTensor& w = weight(prefix + ".weight", c_in, Grouping::Dense, c.groups);
  c.c_out = int(w.shape[0]);
  c.kernel = int(w.shape[2]);
  c.weight = w.values;
  c.bias = vector_of(prefix + ".bias", c.c_out).values;
  return c;
}

}  // namespace lab::model_detail
