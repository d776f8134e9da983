#include "common/kv_budget.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

namespace epyctune::common {

KvBudget parse_kv_budget(const std::string& v) {
  size_t used = 0;
  double n = -1;
  try {
    n = std::stod(v, &used);
  } catch (const std::exception&) {
  }
  std::string unit = v.substr(std::min(used, v.size()));
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'b' && unit != "b") unit.pop_back();  // "2GB", "2GiB"
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
  static const std::map<std::string, double> scale = {{"", 1},
                                                      {"b", 1},
                                                      {"k", 1024.0},
                                                      {"m", 1048576.0},
                                                      {"g", 1073741824.0},
                                                      {"t", 1099511627776.0}};
  const bool tokens = unit == "tok";
  const auto it = scale.find(unit);
  const double value = tokens ? n : it == scale.end() ? -1 : n * it->second;
  const double limit = tokens ? 2147483647.0 : 1125899906842624.0;  // 2^31 - 1, 1 PiB
  if (!std::isfinite(value) || !(value >= 1) || value > limit)
    throw std::invalid_argument(
        "expected a size such as 2G or 512M (at most 1P), or positions such as 65536tok; got '" +
        v + "'");
  if (tokens) return {0, static_cast<int64_t>(value)};
  return {static_cast<int64_t>(value), 0};
}

}  // namespace epyctune::common
