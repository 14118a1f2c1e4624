// Optimal-string-alignment distance over lower-cased names.
#include "kernels/name_suggestion.hpp"

#include <algorithm>
#include <cctype>

namespace lab {
namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, typed.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(lower(typed), lower(c));
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string unknown_name_hint(const std::string& typed, const std::vector<std::string>& candidates,
                              const std::string& listed_elsewhere) {
  if (const std::optional<std::string> close = closest_name(typed, candidates))
    return " (did you mean '" + *close + "'?)";
  std::string list;
  for (const std::string& c : candidates) list += (list.empty() ? "" : ", ") + c;
  if (list.size() > kMaxListedBytes && !listed_elsewhere.empty()) return " (" + listed_elsewhere + ")";
  return " (valid: " + list + ")";
}

}  // namespace lab
