// The little Unicode the tokenizers need: UTF-8 decoding that never fails,
// the \p{L} / \p{N} / \s classes of the pre-tokenizer patterns, and GPT-2's
// byte <-> printable-code-point mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::engine::unicode {

struct CodePoint {
  uint32_t cp;      // U+FFFD for a malformed sequence
  uint32_t offset;  // byte offset in the text
  uint32_t len;     // bytes (1 for a malformed byte, which is kept as is)
};

// Decodes UTF-8; a malformed or truncated sequence yields U+FFFD for one byte
// so every input byte belongs to exactly one code point.
std::vector<CodePoint> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

// General-category bits, as the pre-tokenizer patterns name them.
enum Category : uint32_t {
  kLu = 1,
  kLl = 2,
  kLt = 4,
  kLm = 8,
  kLo = 16,
  kLetter = kLu | kLl | kLt | kLm | kLo,
  kMark = 32,          // \p{M}
  kNumber = 64,        // \p{N}
  kPunctuation = 128,  // \p{P}
  kSymbol = 256,       // \p{S}
};
uint32_t categories(uint32_t cp);  // the Category bits of cp (0 for none)

bool is_letter(uint32_t cp);      // general category L*
bool is_number(uint32_t cp);      // general category N*
bool is_whitespace(uint32_t cp);  // the White_Space property, as regex \s

// GPT-2 byte-level BPE maps every byte to a printable code point (space ->
// U+0120 'Ġ') so merges never see raw control bytes.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped code point
// Inverse mapping; -1 for a code point that is not the image of a byte.
int unicode_to_byte(uint32_t cp);

}  // namespace epyctune::engine::unicode
