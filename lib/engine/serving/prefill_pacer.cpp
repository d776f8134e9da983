#include "engine/serving/prefill_pacer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace epyctune::engine::serving {

namespace {
// The first mixed steps' chunk, before any has been timed: small enough
// that one step cannot stall the decoding requests for long.
constexpr int kStartChunk = 8;
constexpr int kRefresh = 8;
}  // namespace

PrefillPacer::PrefillPacer(int budget, double gap_target)
    : budget_(std::max(1, budget)),
      target_(gap_target),
      chunk_(gap_target == 0 ? std::max(1, budget) : std::min(std::max(1, budget), kStartChunk)) {
  if (gap_target != 0 && !(gap_target > 1.0))
    throw std::invalid_argument("PrefillPacer: gap_target must be 0 (off) or > 1");
}

int PrefillPacer::chunk(int decoding) const {
  if (decoding <= 0) return budget_;
  // Every kRefresh mixed steps, one without prompt rows: the decoding
  // requests' own steps slow as their contexts grow, and a stale t(D) would
  // count that against the prompt rows and starve the prompt.
  return target_ != 0 && mixed_ == kRefresh ? 0 : chunk_;
}

void PrefillPacer::observed(int decoding, int prompt, double seconds) {
  if (target_ == 0 || decoding <= 0 || !(seconds > 0)) return;
  if (prompt == 0) {
    mixed_ = 0;
    if (decoding != base_rows_) {
      base_rows_ = decoding;
      base_s_ = seconds;
    } else {
      base_s_ = 0.75 * base_s_ + 0.25 * seconds;
    }
    return;
  }
  // Counted even at a decode count never timed alone (a request finished
  // or joined mid-prompt), so that a refresh step soon times it.
  mixed_ = std::min(mixed_ + 1, kRefresh);
  if (decoding != base_rows_ || base_s_ <= 0) return;
  // A step costs about t(D) + C x r (r: a prompt row's cost, which grows
  // with the prompt's position), so C = (target - 1) x t(D) / r makes it
  // target x t(D). r is a moving average: one step slowed by something else
  // must not collapse the chunk, nor one fast step double it.
  const double per_row = std::max(0.0, seconds - base_s_) / prompt;
  row_s_ = row_s_ > 0 ? 0.7 * row_s_ + 0.3 * per_row : per_row;
  const double want = row_s_ > 0 ? (target_ - 1.0) * base_s_ / row_s_ : 2.0 * chunk_;
  chunk_ = static_cast<int>(std::clamp(std::floor(want), 1.0, double(budget_)));
}

}  // namespace epyctune::engine::serving
