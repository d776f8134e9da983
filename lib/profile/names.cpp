// What a name or a path in a profile may be: the strings that reach file
// names, resctrl groups, the boot loader drop-in and the journal.
#include <fmt/format.h>

#include <cctype>

#include "profile/schema.hpp"

namespace epyctune::profile::detail {

std::string identifier_problem(std::string_view v) {
  if (v.empty()) return "is empty";
  if (v.size() > kMaxIdentifier)
    return fmt::format("is {} characters long, more than {}", v.size(), kMaxIdentifier);
  if (!std::isalnum(static_cast<unsigned char>(v.front())))
    return "must start with a letter or digit";
  for (char c : v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return "has a character outside A-Z a-z 0-9 . _ -";
  return "";
}

std::string path_problem(std::string_view v, std::string_view dir, std::string_view ext) {
  if (v.size() > kMaxPath) return fmt::format("is longer than {} bytes", kMaxPath);
  if (v.empty() || v.front() != '/') return "is not an absolute path";
  std::string_view rest = v.substr(1);
  std::string_view last;
  while (true) {
    auto slash = rest.find('/');
    std::string_view comp = rest.substr(0, slash);
    if (!identifier_problem(comp).empty())
      return "has a path component that is empty, \".\" or \"..\", or uses characters outside "
             "A-Z a-z 0-9 . _ -";
    last = comp;
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  if (!dir.empty() && v.substr(0, v.size() - last.size()) != std::string(dir) + "/")
    return fmt::format("is not a file directly in {}", dir);
  if (!ext.empty() && (last.size() <= ext.size() || last.substr(last.size() - ext.size()) != ext))
    return fmt::format("does not end in {}", ext);
  return "";
}

}  // namespace epyctune::profile::detail
