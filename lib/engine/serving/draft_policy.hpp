// Speculation under load: whether a decoding request's proposals are worth
// rows in the next batched pass. A pass of R rows costs about a + r x R
// (a: the weights streamed once; r: a row's compute); its B decode rows
// give B tokens. A draft row adds r to everyone's step and gives a token
// with the chance that it and every draft before it are accepted (a^i for
// the i-th, a the request's acceptance rate). So the i-th draft row raises
// the step's tokens per second while a^i > r x B / (a + r x B): at one
// request on a host bound by memory almost any proposal pays; with many on
// a host bound by compute, only the likely ones.
//
// A draft model's proposals cost its passes too, one per proposed token
// for all the requests it drafts for together, so their length is chosen
// for the whole step: the k whose expected tokens over the step's time
// (k draft passes and the longer target pass) is highest.
#pragma once

#include <span>

namespace epyctune::engine::serving {

// A least-squares line through recent passes' (rows, seconds), forgetting
// a pass's weight over ~50 passes: contexts grow and the host's load
// changes.
class PassFit {
 public:
  void observed(int rows, double seconds);
  bool empty() const { return n_ == 0; }
  // Row counts varied by about a row or more: a and r are fitted.
  bool sloped() const;
  double a() const;
  double r() const;  // 0 unless sloped()
  // A pass of `rows` rows: a + r x rows, or the mean pass when not sloped().
  double seconds(int rows) const;

 private:
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

class DraftPolicy {
 public:
  DraftPolicy() = default;
  // A fixed threshold instead of the fitted one (0: every proposal is
  // verified, and a draft model drafts as far as each request has room),
  // so that a test's drafting does not depend on timing.
  static DraftPolicy fixed(double threshold) {
    DraftPolicy p;
    p.fixed_ = threshold;
    return p;
  }
  // Draft rows worth adding for a request with `proposed` proposals and
  // acceptance rate `accept`, beside `decoding` decode rows.
  int rows_worth(int proposed, double accept, int decoding) const;
  // How many tokens a draft model proposes this step for the requests with
  // acceptance rates accept[i] and room for room[i] more, beside a pass of
  // `rows` rows with `decoding` decode rows; `draft` times the draft's
  // passes. 0: drafting does not pay now.
  int draft_len(std::span<const double> accept, std::span<const int> room, int rows, int decoding,
                const PassFit& draft) const;
  // A target pass of `rows` rows took `seconds`.
  void observed(int rows, double seconds) { target_.observed(rows, seconds); }
  // A request's acceptance rate after `verified` proposals, `accepted` of
  // them accepted (a moving average from `accept`).
  static double updated(double accept, int verified, int accepted);
  // After a pass where its proposals were not worth a row: a step back
  // toward kPriorAccept (a rate never tried again would never change).
  static double declined(double accept);
  static constexpr double kPriorAccept = 0.6;

 private:
  PassFit target_;
  double fixed_ = -1;  // < 0: fitted
};

}  // namespace epyctune::engine::serving
