// Speculation under load: whether a decoding request's n-gram proposals
// are worth rows in the next batched pass. A pass of R rows costs about
// a + r x R (a: the weights streamed once; r: a row's compute); its B
// decode rows give B tokens. A draft row adds r to everyone's step and
// gives a token with the chance that it and every draft before it are
// accepted (a^i for the i-th, a the request's acceptance rate). So the
// i-th draft row raises the step's tokens per second while
// a^i > r x B / (a + r x B): at one request on a host bound by memory
// almost any proposal pays; with many on a host bound by compute, only
// the likely ones.
#pragma once

namespace epyctune::engine::serving {

class DraftPolicy {
 public:
  DraftPolicy() = default;
  // A fixed threshold instead of the fitted one (0: every proposal is
  // verified), so that a test's drafting does not depend on timing.
  static DraftPolicy fixed(double threshold) {
    DraftPolicy p;
    p.fixed_ = threshold;
    return p;
  }
  // Draft rows worth adding for a request with `proposed` proposals and
  // acceptance rate `accept`, beside `decoding` decode rows.
  int rows_worth(int proposed, double accept, int decoding) const;
  // A pass of `rows` rows took `seconds`.
  void observed(int rows, double seconds);
  // A request's acceptance rate after `verified` proposals, `accepted` of
  // them accepted (a moving average from `accept`).
  static double updated(double accept, int verified, int accepted);
  // After a pass where its proposals were not worth a row: a step back
  // toward kPriorAccept (a rate never tried again would never change).
  static double declined(double accept);
  static constexpr double kPriorAccept = 0.6;

 private:
  // Moving sums of (rows, seconds) for the line's least-squares fit.
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double fixed_ = -1;  // < 0: fitted
};

}  // namespace epyctune::engine::serving
