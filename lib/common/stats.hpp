// Small statistics shared by the benches; one copy of each.
#pragma once

#include <vector>

namespace epyctune::common {

// The middle value (the mean of the two middle ones for an even count); 0
// for none.
double median(std::vector<double> v);

}  // namespace epyctune::common
