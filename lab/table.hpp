// Plain-text tables for the terminal (columns padded to their widest cell) and the number formats the verbs
// share.
#pragma once
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace lab {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Text columns are left-aligned, columns whose cells all start like numbers right-aligned.
  void print(std::ostream& os, const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_sci(double v);                            // "1.23e-07"
std::string format_ms(double ms);                            // "0.0123 ms" with 3 significant digits
std::string format_fixed(double v, int decimals);            // "12.35"
std::string format_sig(double v, int digits);                // "0.0123", "1.23e+03" (printf %g)
std::string format_bytes(double bytes);                      // "1.5 MiB"
std::string format_shape(const std::vector<size_t>& shape);  // "[32, 4, 8400]"
std::string join(const std::vector<std::string>& items, const std::string& sep);

}  // namespace lab
