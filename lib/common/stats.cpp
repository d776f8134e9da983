#include "common/stats.hpp"

#include <algorithm>

namespace epyctune::common {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<long>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<long>(n / 2));
  return 0.5 * (lo + hi);
}

}  // namespace epyctune::common
