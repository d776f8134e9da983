#include <doctest/doctest.h>

#include "engine/serving/draft_policy.hpp"

using epyctune::engine::serving::DraftPolicy;

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
