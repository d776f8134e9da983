#include "engine/tokenizer/unicode.hpp"

#include <array>

namespace epyctune::engine::unicode {

std::vector<CodePoint> decode_utf8(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    uint32_t cp = 0xFFFD;
    uint32_t len = 1;
    auto cont = [&](size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
    if (b < 0x80) {
      cp = b;
    } else if ((b & 0xE0) == 0xC0 && cont(1)) {
      const uint32_t c = ((b & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      if (c >= 0x80) cp = c, len = 2;
    } else if ((b & 0xF0) == 0xE0 && cont(1) && cont(2)) {
      const uint32_t c = ((b & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
      if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) cp = c, len = 3;
    } else if ((b & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
      const uint32_t c = ((b & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) |
                         ((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3Fu);
      if (c >= 0x10000 && c <= 0x10FFFF) cp = c, len = 4;
    }
    out.push_back({cp, static_cast<uint32_t>(i), len});
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100 upwards in byte order.
struct ByteMap {
  std::array<std::string, 256> utf8;
  std::array<int, 0x200> inverse;
  ByteMap() {
    inverse.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(utf8[b], cp);
      inverse[cp] = b;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().utf8[b];
}

int unicode_to_byte(uint32_t cp) {
  return cp < 0x200 ? byte_map().inverse[cp] : -1;
}

}  // namespace epyctune::engine::unicode
