// Escaping of untrusted text for messages (see printable_text.hpp).
#include "nvrtc_runtime/printable_text.hpp"

#include <cstdint>
#include <cstdio>

namespace lab {
namespace {

std::string hex_escape(unsigned char byte) {
  char buffer[5];
  std::snprintf(buffer, sizeof buffer, "\\x%02x", byte);
  return buffer;
}

// Length of the valid UTF-8 sequence of 2..4 bytes starting at text[i], or 0 (overlong forms, surrogates
// and code points above U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  uint32_t code = lead & (0x7Fu >> length);  // the payload bits of the lead byte
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(k) & 0x3F);
  }
  const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string printable(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  const std::string_view kept = cut ? text.substr(0, max_bytes) : text;
  std::string out;
  out.reserve(kept.size());
  for (size_t i = 0; i < kept.size();) {
    const auto c = static_cast<unsigned char>(kept[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
      ++i;
      continue;
    }
    const size_t n = c >= 0x80 ? utf8_sequence_length(kept, i) : 0;
    const bool c1_control = n == 2 && c == 0xC2 && static_cast<unsigned char>(kept[i + 1]) <= 0x9F;
    if (n > 0 && !c1_control) {
      out.append(kept.substr(i, n));
      i += n;
      continue;
    }
    out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : hex_escape(c);
    ++i;
  }
  if (cut) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string printable_path(const std::filesystem::path& path) {
  return printable(std::string_view(path.native()));
}

}  // namespace lab
