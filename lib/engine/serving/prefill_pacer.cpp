#include "engine/serving/prefill_pacer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace epyctune::engine::serving {

namespace {
// The first mixed steps' chunk, before any has been timed: small enough
// that one step cannot stall the decoding requests for long.
constexpr int kStartChunk = 8;
constexpr int kRefresh = 8;
constexpr double kGrowth = 1.25;
constexpr double kMinRoom = 0.25;
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
    // A decode-only step the pacer did not ask for: no prompt was waiting,
    // so the next prompt rows start a new read with a new reference.
    if (mixed_ != kRefresh) ref_s_ = 0;
    mixed_ = 0;
    if (decoding != base_rows_) {
      base_rows_ = decoding;
      base_s_ = seconds;
      last_prompt_ = 0;
      ref_s_ = 0;
    } else {
      base_s_ = 0.75 * base_s_ + 0.25 * seconds;
    }
    return;
  }
  // Counted even at a decode count never timed alone (a request finished
  // or joined mid-prompt), so that a refresh step soon times it.
  mixed_ = std::min(mixed_ + 1, kRefresh);
  if (decoding != base_rows_ || base_s_ <= 0) return;
  if (ref_s_ <= 0) ref_s_ = base_s_;
  // A step costs about t(D) + C x r (r: a prompt row's cost, which grows
  // with the prompt's position), so C = (target - 1) x t(D) / r makes it
  // target x t(D). r is a moving average, so that one step slowed by
  // something else does not collapse the chunk: a row found costlier is
  // believed at once, a cheaper one slowly. The line fits poorly where a
  // pass is bound by memory (rows almost free up to a knee, then compute),
  // and the average cost of a row just past the knee still says "cheap";
  // so the chunk also follows the secant through the last two steps' costs
  // (the marginal cost of a row) and grows at most kGrowth a step: an
  // overshoot is a long gap for every decoder.
  const double extra = std::max(0.0, seconds - base_s_);
  const double per_row = extra / prompt;
  const double w = per_row > row_s_ ? 0.7 : 0.3;
  row_s_ = row_s_ > 0 ? (1.0 - w) * row_s_ + w * per_row : per_row;
  // The target holds against the decoders' pace when the read began, not
  // their pace now: their contexts grow through a long read (a decode-only
  // step 1.3x slower by the end of a 4,000-token one), and a user sees
  // each token's delay against the pace before the prompt came. A little
  // room is kept whatever the growth, so the prompt is always read.
  const double room = std::max(target_ * ref_s_ - base_s_, kMinRoom * (target_ - 1.0) * base_s_);
  double want = row_s_ > 0 ? room / row_s_ : 2.0 * chunk_;
  if (last_prompt_ > 0 && std::abs(prompt - last_prompt_) >= 2) {
    const double slope = (extra - last_extra_) / (prompt - last_prompt_);
    if (slope > 0) want = std::min(want, prompt + (room - extra) / slope);
  }
  last_prompt_ = prompt;
  last_extra_ = extra;
  // At least a row more a step: 1.25 x 1 rounds down to 1, and one noisy
  // step that cut the chunk to a row would hold it there.
  want = std::min(want, std::max(kGrowth * chunk_, chunk_ + 1.0));
  chunk_ = static_cast<int>(std::clamp(std::floor(want), 1.0, double(budget_)));
}

}  // namespace epyctune::engine::serving
