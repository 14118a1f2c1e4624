// Reads Conv modules out of a checkpoint's state dict: every tensor looked up by its full key, every shape
// checked against the channels its producer delivers, BatchNorm folded in float64. Errors are UsageErrors
// naming the checkpoint file and the key.
#pragma once
#include <string>
#include <vector>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::model_detail {

// Dense: a plain Conv (groups 1). Depthwise: a DWConv, groups = gcd(c_in, c_out).
enum class Grouping { Dense, Depthwise };

class StateDictReader {
 public:
  explicit StateDictReader(const Checkpoint& checkpoint);

  const std::string& file() const { return file_; }
  bool has(const std::string& key) const { return checkpoint_.contains(key); }
  // How many consecutive children "<prefix>.0", "<prefix>.1", ... have at least one tensor.
  int count_children(const std::string& prefix) const;
  // The tensor, or UsageError "<file>: missing tensor '<key>'" (also when its values do not fill its shape).
  const HostTensor& tensor(const std::string& key) const;
  // UsageError "<file>: tensor '<key>' has shape [..] but <why>".
  [[noreturn]] void fail_shape(const std::string& key, const std::string& why) const;

  // Ultralytics Conv at `prefix` ("<prefix>.conv.weight" + "<prefix>.bn.*") reading `c_in` channels, BN
  // folded.
  ConvSpec conv(const std::string& prefix, int c_in, Grouping grouping, bool silu, int stride = 1) const;
  // nn.Conv2d with bias at `prefix` ("<prefix>.weight", "<prefix>.bias"), groups 1, no activation.
  ConvSpec plain_conv(const std::string& prefix, int c_in) const;

 private:
  const HostTensor& weight(const std::string& key, int c_in, Grouping grouping, int& groups) const;
  const HostTensor& vector_of(const std::string& key, int length) const;

  const Checkpoint& checkpoint_;
  std::string file_;
};

}  // namespace lab::model_detail
