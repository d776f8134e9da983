#include "engine/speculative/rejection.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/sampling/sampler.hpp"

namespace epyctune::engine::speculative {

Verdict rejection_step(std::span<const float> p, std::span<const float> q, int x, double u_accept,
                       double u_resample, std::vector<float>& scratch) {
  if (x < 0 || static_cast<size_t>(x) >= p.size())
    throw std::invalid_argument("rejection_step: drafted token out of range");
  if (!q.empty() && q.size() != p.size())
    throw std::invalid_argument("rejection_step: p and q differ in size");
  const double px = p[x];
  const double qx = q.empty() ? 1.0 : q[x];
  // qx == 0 cannot happen for a token actually drawn from q; treat it as an
  // always-accept only when p allows it, never divide by zero.
  if (px >= qx || (qx > 0.0 && u_accept < px / qx)) return {true, x};

  scratch.assign(p.begin(), p.end());
  if (q.empty()) {
    scratch[x] = 0.0f;
  } else {
    for (size_t i = 0; i < scratch.size(); ++i) scratch[i] = std::max(0.0f, p[i] - q[i]);
  }
  bool any = std::any_of(scratch.begin(), scratch.end(), [](float v) { return v > 0.0f; });
  // Rounding can leave an empty residual when p and q are equal up to float
  // error; rejection then had probability ~0 and p itself is the right law.
  if (!any) scratch.assign(p.begin(), p.end());
  return {false, sampling::sample_from(scratch, u_resample)};
}

}  // namespace epyctune::engine::speculative
