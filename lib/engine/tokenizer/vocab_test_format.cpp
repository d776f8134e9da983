#include "engine/tokenizer/vocab_test_format.hpp"

namespace epyctune::engine {

std::vector<std::string> split_vocab_test_inputs(std::string_view raw) {
  constexpr std::string_view sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string_view::npos) {
      out.emplace_back(raw.substr(pos));
      break;
    }
    out.emplace_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::string format_vocab_test_ids(std::span<const int32_t> ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace epyctune::engine
