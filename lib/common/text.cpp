#include "common/text.hpp"

namespace epyctune::common {

namespace {
bool blank(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}
}  // namespace

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string trim(std::string_view s) {
  return std::string(trim_view(s));
}

}  // namespace epyctune::common
