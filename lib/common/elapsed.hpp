// The stopwatch the engine and its benches read: seconds on the steady clock.
#pragma once

#include <chrono>

namespace epyctune::common {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace epyctune::common
