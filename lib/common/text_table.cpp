#include "common/text_table.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace epyctune::common {

bool colour_for(int fd) {
  const char* no = std::getenv("NO_COLOR");
  if (no != nullptr && *no != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return ::isatty(fd) == 1;
}

std::string paint(std::string_view text, Tone tone, bool colour) {
  const char* code = nullptr;
  switch (tone) {
    case Tone::plain:
      break;
    case Tone::good:
      code = "32";  // green
      break;
    case Tone::change:
      code = "33";  // yellow
      break;
    case Tone::warn:
      code = "35";  // magenta
      break;
    case Tone::bad:
      code = "1;31";  // bold red
      break;
    case Tone::dim:
      code = "2";
      break;
    case Tone::heading:
      code = "1";  // bold
      break;
  }
  if (!colour || code == nullptr || text.empty()) return std::string(text);
  return std::string("\033[") + code + "m" + std::string(text) + "\033[0m";
}

size_t display_width(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string TextTable::render(bool colour) const {
  std::vector<size_t> width;
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.cells.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], display_width(r.cells[i].text));
    }
  std::string out;
  for (const auto& r : rows_) {
    if (r.cells.empty()) {
      out += paint(r.line.text, r.line.tone, colour) + "\n";
      continue;
    }
    // The last non-empty cell ends the line: no trailing blanks.
    size_t last = r.cells.size();
    while (last > 0 && r.cells[last - 1].text.empty()) --last;
    std::string line = indent_;
    for (size_t i = 0; i < last; ++i) {
      const auto& c = r.cells[i];
      line += paint(c.text, c.tone, colour);
      if (i + 1 < last) line += std::string(width[i] - display_width(c.text) + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace epyctune::common
