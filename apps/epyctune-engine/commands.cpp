#include "apps/epyctune-engine/commands.hpp"

namespace epyctune::engine_cli {
std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}
}  // namespace epyctune::engine_cli
