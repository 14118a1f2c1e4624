// "Did you mean" for a mistyped name (a verb, kernel, variant or parameter): the closest candidate by edit
// distance, ignoring letter case, where a swap of two neighbouring letters counts as one edit.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace lab {

// The candidate closest to `typed` when it is within a third of the typed length (at least one edit).
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" when a candidate is close, else " (valid: a, b, c)"; where that list would pass
// kMaxListedBytes and `listed_elsewhere` is given (e.g. "`lab list` names the 53 kernels"), " (<that>)"
// instead, so the error stays one short line.
constexpr size_t kMaxListedBytes = 240;
std::string unknown_name_hint(const std::string& typed, const std::vector<std::string>& candidates,
                              const std::string& listed_elsewhere = "");

}  // namespace lab
