// Memory read-bandwidth probe for the roofline: every pool thread streams its
// slice of a buffer much larger than L3; the figure is the median over repeats.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine::runtime {

struct BandwidthResult {
  double median_gbps = 0, min_gbps = 0, max_gbps = 0;  // 1 GB = 1e9 bytes
  size_t buffer_bytes = 0;
  int repeats = 0;
  std::vector<double> samples_gbps;
};

// buffer_bytes 0 = default (1 GiB). The buffer is touched by the pool threads
// first, so its pages sit where those threads' memory would.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = 0, int repeats = 7);

}  // namespace epyctune::engine::runtime
