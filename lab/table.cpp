// Table layout and number formatting.
#include "lab/table.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace lab {

namespace {

bool looks_numeric(const std::string& s) {
  if (s.empty() || s == "-") return true;
  const char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+' || c == '.') && s.size() > 1);
}

}  // namespace

void Table::print(std::ostream& os, const std::string& indent) const {
  const size_t n = headers_.size();
  std::vector<size_t> width(n);
  std::vector<bool> numeric(n, true);
  for (size_t c = 0; c < n; ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < n && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      numeric[c] = numeric[c] && looks_numeric(row[c]);
    }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out = indent;
    for (size_t c = 0; c < n; ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      const bool right = numeric[c] && !header && !rows_.empty();
      out += right ? pad + cell : cell + (c + 1 < n ? pad : "");
      if (c + 1 < n) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << '\n';
  };
  line(headers_, true);
  for (const auto& row : rows_) line(row, false);
}

std::string format_sci(double v) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", ms);
  return buf;
}

std::string format_fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_sig(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return format_fixed(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

std::string format_shape(const std::vector<size_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

}  // namespace lab
