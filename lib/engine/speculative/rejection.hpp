// The rejection-sampling step that makes sampled speculation lossless
// (Leviathan et al. 2023, Chen et al. 2023): a token x drawn from the draft's
// distribution q is kept with probability min(1, p(x)/q(x)); otherwise a token
// is drawn from norm(max(0, p - q)). The kept-or-redrawn token is then
// distributed exactly as p.
#pragma once

#include <span>
#include <vector>

namespace epyctune::engine::speculative {

struct Verdict {
  bool accepted = false;
  int token = -1;  // x when accepted, the residual draw otherwise
};

// p: the target's distribution; q: the draft's, or empty for a deterministic
// proposal (n-gram lookup), which is a one-hot q at x. u_accept and u_resample
// are independent uniforms in [0, 1). scratch avoids an allocation per call.
Verdict rejection_step(std::span<const float> p, std::span<const float> q, int x, double u_accept,
                       double u_resample, std::vector<float>& scratch);

}  // namespace epyctune::engine::speculative
