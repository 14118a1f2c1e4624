// The precision policy table.
#include "pipeline/executor/precision_policy.hpp"

namespace lab {

Precision conv_precision(ConvRole, Precision network) {
  return network;
}

}  // namespace lab
