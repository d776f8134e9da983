// Progress of long library operations (model load, model writing). The
// library only reports through the callback; whether and how to show it is
// the application's choice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>

#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine::runtime {

// stage: what is under way ("copy", "page-in", a tensor name); done and
// total in the stage's own unit (bytes, tensors). Called on the caller's
// thread, never from pool workers.
using ProgressFn = std::function<void(std::string_view stage, uint64_t done, uint64_t total)>;

// pool.parallel_for(n, 1, body) over items weighing size_of(i) bytes each.
// With a progress callback the items run in about 64 rounds, each its own
// parallel region, and progress(stage, bytes done, total bytes) follows each
// round; without one it is a single region, as before.
template <class SizeOf, class Body>
void parallel_for_progress(ThreadPool& pool, int64_t n, SizeOf size_of, std::string_view stage,
                           const ProgressFn& progress, Body body) {
  if (!progress) {
    pool.parallel_for(n, 1, body);
    return;
  }
  uint64_t total = 0, done = 0;
  for (int64_t i = 0; i < n; ++i) total += size_of(i);
  progress(stage, 0, total);
  const int64_t round = std::max<int64_t>(pool.size(), n / 64);
  for (int64_t b = 0; b < n; b += round) {
    const int64_t e = std::min(n, b + round);
    pool.parallel_for(e - b, 1,
                      [&](int64_t lb, int64_t le, int tid) { body(b + lb, b + le, tid); });
    for (int64_t i = b; i < e; ++i) done += size_of(i);
    progress(stage, done, total);
  }
}

}  // namespace epyctune::engine::runtime
