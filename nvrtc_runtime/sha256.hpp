// SHA-256 (FIPS 180-4) for cache keys and cache-entry integrity.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lab {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  // Feeds a length prefix then the data, so concatenated fields cannot collide.
  Sha256& field(std::string_view data);
  std::string hex();  // finalises

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t total_ = 0;
  size_t fill_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace lab
