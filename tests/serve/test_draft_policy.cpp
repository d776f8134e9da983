#include <doctest/doctest.h>

#include <vector>

#include "engine/serving/draft_policy.hpp"

using epyctune::engine::serving::DraftPolicy;
using epyctune::engine::serving::PassFit;

namespace {

// Passes of 1 .. 12 rows on a host where a pass of R rows takes a + r R.
DraftPolicy fitted(double a, double r) {
  DraftPolicy p;
  for (int i = 0; i < 60; ++i) {
    const int rows = 1 + i % 12;
    p.observed(rows, a + r * rows);
  }
  return p;
}

}  // namespace

TEST_CASE("proposals pay at one request on a host bound by memory, few at many bound by compute") {
  // Memory-bound: 20 ms of weights, 0.5 ms a row. At one request the i-th
  // proposal pays while 0.6^i > 0.5 / 20.5: the first seven of eight.
  const DraftPolicy mem = fitted(0.020, 0.0005);
  CHECK(mem.rows_worth(8, 0.6, 1) == 7);
  // Compute-bound: 10 ms + 5 ms a row. At 8 requests a row must be used
  // with a chance over 40 / 50: none at 0.6, two at 0.9 (0.9, 0.81).
  const DraftPolicy cpu = fitted(0.010, 0.005);
  CHECK(cpu.rows_worth(8, 0.6, 8) == 0);
  CHECK(cpu.rows_worth(8, 0.9, 8) == 2);
  // ... and at one request, 5 / 15: two at 0.6 (0.6, 0.36).
  CHECK(cpu.rows_worth(8, 0.6, 1) == 2);
  CHECK(cpu.rows_worth(0, 0.9, 1) == 0);
  CHECK(cpu.rows_worth(3, 0.9, 0) == 0);
}

TEST_CASE("before the passes vary, likely proposals go ahead; a fixed threshold is kept") {
  DraftPolicy p;
  for (int i = 0; i < 10; ++i) p.observed(4, 0.03);  // every pass the same: no line to fit
  CHECK(p.rows_worth(8, 0.6, 4) == 2);               // 0.6, 0.36 > 0.25
  CHECK(DraftPolicy::fixed(0).rows_worth(5, 0.1, 16) == 5);
}

TEST_CASE("the acceptance rate follows outcomes and drifts back when not tried") {
  double a = DraftPolicy::kPriorAccept;
  a = DraftPolicy::updated(a, 4, 4);
  CHECK(a > DraftPolicy::kPriorAccept);
  double b = DraftPolicy::updated(DraftPolicy::kPriorAccept, 3, 0);
  CHECK(b < 0.35);
  for (int i = 0; i < 200; ++i) b = DraftPolicy::declined(b);
  CHECK(b == doctest::Approx(DraftPolicy::kPriorAccept).epsilon(0.01));
  CHECK(DraftPolicy::declined(0.9) == 0.9);
}

TEST_CASE("a draft model drafts the length that gives the most tokens a second") {
  PassFit draft;
  for (int i = 0; i < 10; ++i) draft.observed(1, 0.004);  // 4 ms a draft pass
  const std::vector<double> one{0.8};
  const std::vector<int> room8{8};
  // Memory-bound target (20 ms + 0.5 ms a row): (1 + 0.8 + .. + 0.8^k) /
  // (20.5 + 4.5 k ms) peaks at k = 4 (87.3 tokens/s; 86.8 at 3, 85.8 at 5).
  const DraftPolicy mem = fitted(0.020, 0.0005);
  CHECK(mem.draft_len(one, room8, 1, 1, draft) == 4);
  // Less room than that: as far as it goes.
  CHECK(mem.draft_len(one, std::vector<int>{2}, 1, 1, draft) == 2);
  // Compute-bound (10 ms + 5 ms a row) with 8 requests at 0.6: the rows
  // cost more than the tokens they bring.
  const DraftPolicy cpu = fitted(0.010, 0.005);
  const std::vector<double> eight(8, 0.6);
  const std::vector<int> rooms(8, 8);
  CHECK(cpu.draft_len(eight, rooms, 8, 8, draft) == 0);
  // No room, or nothing decoding: nothing to draft.
  CHECK(mem.draft_len(one, std::vector<int>{0}, 1, 1, draft) == 0);
  CHECK(mem.draft_len(one, room8, 1, 0, draft) == 0);
  // Before the draft's passes are timed, a short probe; a fixed policy
  // drafts as far as there is room.
  CHECK(mem.draft_len(one, room8, 1, 1, PassFit{}) == 2);
  CHECK(DraftPolicy::fixed(0).draft_len(eight, rooms, 8, 8, draft) == 8);
}

TEST_CASE("a pass fit: a line once the rows vary, the mean pass before") {
  PassFit f;
  CHECK(f.empty());
  f.observed(4, 0.03);
  f.observed(4, 0.05);
  CHECK_FALSE(f.sloped());
  CHECK(f.seconds(100) == doctest::Approx(0.04).epsilon(0.01));  // the older pass weighs a little less
  for (int i = 0; i < 40; ++i) f.observed(1 + i % 8, 0.01 + 0.002 * (1 + i % 8));
  CHECK(f.sloped());
  CHECK(f.r() == doctest::Approx(0.002).epsilon(0.2));
}
