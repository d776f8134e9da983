#include <chrono>

#include "engine/speculative/draft_feed.hpp"

namespace epyctune::engine::speculative {

void SharedFeed::start(std::span<const int32_t> prompt) {
  const auto t0 = std::chrono::steady_clock::now();
  d_.prefill(prompt);
  draft_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<Proposal> SharedFeed::take(std::span<const int32_t> hist, int k) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Proposal> out;
  if (k > 0 && d_.enabled()) out = d_.propose(hist, k);
  draft_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace epyctune::engine::speculative
