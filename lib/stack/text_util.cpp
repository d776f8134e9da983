#include "stack/text_util.hpp"

#include <cctype>
#include <charconv>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace epyctune::stack {

uint64_t parse_u64(std::string_view text) {
  std::string t = trim(text);
  int base = 10;
  std::string_view digits = t;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty())
    throw std::invalid_argument("not a number: '" + t + "'");
  return v;
}

namespace {

// Line boundaries: [begin, end) of each line including its '\n'.
std::vector<std::pair<size_t, size_t>> lines_of(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t b = 0;
  while (b < s.size()) {
    size_t nl = s.find('\n', b);
    size_t e = nl == std::string::npos ? s.size() : nl + 1;
    out.emplace_back(b, e);
    b = e;
  }
  return out;
}

bool is_header(std::string_view line) {
  auto t = trim(line);
  return t.size() >= 2 && t.front() == '[';
}

// [begin, end) of the section in `file`, or npos.
std::pair<size_t, size_t> section_span(const std::string& file, const std::string& name) {
  auto lines = lines_of(file);
  std::string header = "[" + name + "]";
  for (size_t i = 0; i < lines.size(); ++i) {
    auto [b, e] = lines[i];
    if (trim(std::string_view(file).substr(b, e - b)) != header) continue;
    size_t end = file.size();
    for (size_t k = i + 1; k < lines.size(); ++k)
      if (is_header(
              std::string_view(file).substr(lines[k].first, lines[k].second - lines[k].first))) {
        end = lines[k].first;
        break;
      }
    return {b, end};
  }
  return {std::string::npos, std::string::npos};
}

}  // namespace

std::optional<std::string> toml_section(const std::string& file, const std::string& name) {
  auto [b, e] = section_span(file, name);
  if (b == std::string::npos) return std::nullopt;
  return file.substr(b, e - b);
}

std::string replace_toml_section(const std::string& file, const std::string& name,
                                 const std::string& text) {
  auto [b, e] = section_span(file, name);
  if (b != std::string::npos) return file.substr(0, b) + text + file.substr(e);
  std::string out = file;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + text;
}

namespace {

struct L3Line {
  size_t begin = std::string::npos;  // start of the token list (after "L3:")
  size_t end = 0;                    // end of the token list (before the newline)
};

L3Line find_l3(const std::string& file) {
  for (auto [b, e] : lines_of(file)) {
    size_t p = b;
    while (p < e && (file[p] == ' ' || file[p] == '\t')) ++p;
    if (file.compare(p, 3, "L3:") != 0) continue;
    size_t end = e;
    while (end > p && (file[end - 1] == '\n' || file[end - 1] == '\r')) --end;
    return {p + 3, end};
  }
  return {};
}

}  // namespace

std::optional<std::string> schemata_domain(const std::string& file, int domain) {
  auto l3 = find_l3(file);
  if (l3.begin == std::string::npos) return std::nullopt;
  std::stringstream ss(file.substr(l3.begin, l3.end - l3.begin));
  std::string tok;
  while (std::getline(ss, tok, ';')) {
    auto eq = tok.find('=');
    if (eq == std::string::npos) continue;
    if (trim(tok.substr(0, eq)) == std::to_string(domain)) return trim(tok.substr(eq + 1));
  }
  return std::nullopt;
}

std::string merge_schemata_domain(const std::string& file, int domain, const std::string& mask) {
  auto l3 = find_l3(file);
  if (l3.begin == std::string::npos)
    return "L3:" + std::to_string(domain) + "=" + mask + "\n" + file;
  std::string list = file.substr(l3.begin, l3.end - l3.begin);
  std::string out;
  bool found = false;
  size_t b = 0;
  while (b <= list.size()) {
    size_t semi = list.find(';', b);
    size_t e = semi == std::string::npos ? list.size() : semi;
    std::string tok = list.substr(b, e - b);
    auto eq = tok.find('=');
    if (eq != std::string::npos && trim(tok.substr(0, eq)) == std::to_string(domain)) {
      tok = tok.substr(0, eq + 1) + mask;
      found = true;
    }
    out += tok;
    if (semi == std::string::npos) break;
    out += ';';
    b = semi + 1;
  }
  if (!found) out += (out.empty() ? "" : ";") + std::to_string(domain) + "=" + mask;
  return file.substr(0, l3.begin) + out + file.substr(l3.end);
}

std::optional<std::string> cmdline_param(const std::string& cmdline, const std::string& name) {
  std::stringstream ss(cmdline);
  std::string tok;
  std::optional<std::string> found;
  // The kernel honours the last occurrence of a repeated parameter.
  while (ss >> tok) {
    if (tok == name) found = "";
    if (tok.size() > name.size() && tok.compare(0, name.size(), name) == 0 &&
        tok[name.size()] == '=')
      found = tok.substr(name.size() + 1);
  }
  return found;
}

bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += len;
  }
  return true;
}

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kB64[v & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int d = k >= 4 - pad ? 0 : val(text[i + k]);
      if (d < 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace epyctune::stack
