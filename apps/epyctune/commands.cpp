#include "apps/epyctune/commands.hpp"

namespace epyctune::cli {
std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}
}  // namespace epyctune::cli
