// Builders of the YOLO26 modules of spec/yolo26.md from the state dict. Each takes the module's key prefix
// and the channel count its input has, derives the rest from the weight shapes and which keys exist, and
// checks that every convolution reads what the previous one wrote.
#pragma once
#include <string>
#include <vector>

#include "pipeline/model/state_dict_reader.hpp"

namespace lab::model_detail {

BottleneckSpec read_bottleneck(const StateDictReader& sd, const std::string& prefix, int c_in);
C3kSpec read_c3k(const StateDictReader& sd, const std::string& prefix, int c_in);
AttentionSpec read_attention(const StateDictReader& sd, const std::string& prefix, int dim, int num_heads);
PsaBlockSpec read_psa_block(const StateDictReader& sd, const std::string& prefix, int c, int num_heads);
C3k2Spec read_c3k2(const StateDictReader& sd, const std::string& prefix, int c_in);
SppfSpec read_sppf(const StateDictReader& sd, const std::string& prefix, int c_in);
C2PsaSpec read_c2psa(const StateDictReader& sd, const std::string& prefix, int c_in);
// The one-to-one (end-to-end) branches of the Detect head over the given levels, and the one-to-many
// branches (cv2/cv3) where the checkpoint has them (a missing tensor of a partial set is an error).
DetectSpec read_detect(const StateDictReader& sd, const std::string& prefix,
                       const std::vector<int>& level_channels, const std::vector<int>& level_strides);

}  // namespace lab::model_detail
