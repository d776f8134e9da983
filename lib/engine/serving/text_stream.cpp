#include "engine/serving/text_stream.hpp"

#include <algorithm>

namespace epyctune::engine::serving {

size_t incomplete_utf8_tail(std::string_view s) {
  // Walk back over at most three continuation bytes to the lead byte.
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes: not a character we could complete
}

TextStream::TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string TextStream::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail that may still grow into a stop string: no
  // text before it can be the start of one (it would have been found above).
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
  std::string_view ready = std::string_view(held_).substr(0, held_.size() - keep);
  ready.remove_suffix(incomplete_utf8_tail(ready));
  std::string out(ready);
  held_.erase(0, out.size());
  return out;
}

std::string TextStream::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace epyctune::engine::serving
