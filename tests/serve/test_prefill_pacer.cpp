#include <doctest/doctest.h>

#include <functional>

#include "engine/serving/prefill_pacer.hpp"

using epyctune::engine::serving::PrefillPacer;

namespace {

// Runs decode-only steps, then mixed ones at the pacer's chunk, on a host
// whose step of R rows takes step(R) seconds; returns the last chunk.
int settle(PrefillPacer& p, int decoding, const std::function<double(int)>& step) {
  for (int i = 0; i < 4; ++i) p.observed(decoding, 0, step(decoding));
  int c = 0;
  for (int i = 0; i < 16; ++i) {
    c = p.chunk(decoding);
    p.observed(decoding, c, step(decoding + c));
  }
  return c;
}

}  // namespace

TEST_CASE("with nothing decoding, prompts get the whole budget") {
  PrefillPacer p(64);
  CHECK(p.chunk(0) == 64);
  CHECK(p.chunk(3) == 8);  // before any step is timed: a small chunk
  CHECK(PrefillPacer(4).chunk(2) == 4);
  CHECK_THROWS(PrefillPacer(64, 1.0));
  PrefillPacer off(64, 0);  // not paced
  CHECK(off.chunk(3) == 64);
  off.observed(3, 0, 0.05);
  off.observed(3, 64, 5.0);
  CHECK(off.chunk(3) == 64);
}

TEST_CASE(
    "bound by compute: the chunk keeps a mixed step near the target times a decode-only one") {
  // Two AVX2 cores, the demo 1B: about 20 ms + 7 ms a row.
  auto step = [](int rows) { return 0.020 + 0.007 * rows; };
  PrefillPacer p(64, 2.0);
  const int c = settle(p, 4, step);
  const double gap = step(4 + c) / step(4);
  CHECK(gap <= 2.05);
  CHECK(gap >= 1.6);
  PrefillPacer q(64, 2.5);
  const int cq = settle(q, 4, step);
  CHECK(cq > c);
  CHECK(step(4 + cq) / step(4) <= 2.55);
  PrefillPacer d(64);  // the default
  CHECK(settle(d, 4, step) == c);
  CHECK(p.chunk(0) == 64);
}

TEST_CASE("bound by memory: the chunk grows to the budget") {
  // A pass costs the same up to 96 rows, a little more beyond.
  auto step = [](int rows) { return 0.200 + (rows > 96 ? 0.001 * (rows - 96) : 0.0); };
  PrefillPacer p(64);
  CHECK(settle(p, 8, step) == 64);
}

TEST_CASE("a slower host shrinks the chunk again, and a new decode count is timed first") {
  PrefillPacer p(256, 2.0);
  const int fast = settle(p, 2, [](int r) { return 0.01 + 0.0001 * r; });
  const int slow = settle(p, 2, [](int r) { return 0.01 + 0.002 * r; });
  CHECK(fast > slow);
  CHECK((0.01 + 0.002 * (2 + slow)) / (0.01 + 0.002 * 2) <= 2.05);
  // A mixed step at a decode count never timed alone leaves the chunk be.
  const int before = p.chunk(5);
  p.observed(5, before, 10.0);
  const int after = p.chunk(5);  // or a refresh step, which times 5 alone
  CHECK((after == before || after == 0));
}

TEST_CASE("a new decode count mid-prompt gets a decode-only step that times it") {
  // A decoder left mid-prompt: mixed steps at 3 decoders, never timed
  // alone, lead to a decode-only step within 9 steps (before, the count of
  // mixed steps stood still at an untimed decode count: no refresh ever
  // came, and the chunk stayed sized for 4 decoders).
  PrefillPacer q(64, 2.5);
  for (int i = 0; i < 4; ++i) q.observed(4, 0, 0.020);
  bool refreshed = false;
  for (int i = 0; i < 9 && !refreshed; ++i) {
    const int k = q.chunk(3);
    refreshed = k == 0;
    q.observed(3, k, k == 0 ? 0.015 : 0.040);
  }
  CHECK(refreshed);
  // Timed now: the chunk follows 3 decoders' step time.
  const int c = q.chunk(3);
  q.observed(3, c, 0.015 + 0.001 * c);
  CHECK(q.chunk(3) > 0);
}

TEST_CASE("bound by memory up to a knee: the chunk grows 1.25x a step and stops near the target") {
  // 4 decoding rows: a pass costs the same up to 24 rows, then 2 ms a row.
  auto step = [](int rows) { return 0.020 + (rows > 24 ? 0.002 * (rows - 24) : 0.0); };
  PrefillPacer p(64, 2.5);
  for (int i = 0; i < 4; ++i) p.observed(4, 0, step(4));
  int c = p.chunk(4), worst = 0;
  for (int i = 0; i < 40; ++i) {
    const int next = p.chunk(4);
    if (next == 0) {  // the refresh step
      p.observed(4, 0, step(4));
      continue;
    }
    CHECK(next <= std::max(c, 1) * 5 / 4);
    c = next;
    worst = std::max(worst, c);
    p.observed(4, c, step(4 + c));
  }
  // The whole budget (64 rows) would take 3.4x a decode-only step; the
  // chunk approaches the knee from below and never overshoots past 2.5x.
  CHECK(step(4 + worst) / step(4) <= 2.55);
  CHECK(c >= 24);
}

TEST_CASE("a chunk cut to one row by a slow step grows again") {
  auto step = [](int rows) { return 0.020 + 0.001 * rows; };
  PrefillPacer p(64, 2.5);
  for (int i = 0; i < 4; ++i) p.observed(4, 0, step(4));
  const int c = settle(p, 4, step);
  p.observed(4, c, 10.0);  // one step slowed by something else
  p.observed(4, c, 10.0);
  int last = 0;
  for (int i = 0; i < 40; ++i) {
    const int k = p.chunk(4);
    p.observed(4, k, k == 0 ? step(4) : step(4 + k));
    if (k > 0) last = k;
  }
  CHECK(last + 2 >= c);
}

TEST_CASE("the target holds against the decoders' pace when the read began") {
  // Their contexts grow through a long read: a decode-only step slows from
  // 20 ms to 36 ms over 80 steps, and a prompt row costs 2 ms beside them.
  int t = 0;
  auto base = [&t] { return 0.020 * (1.0 + 0.01 * t); };
  PrefillPacer p(64, 2.5);
  for (int i = 0; i < 4; ++i) p.observed(4, 0, base());
  double worst = 0;
  int last = 0;
  for (; t < 80; ++t) {
    const int c = p.chunk(4);
    const double s = base() + 0.002 * c;
    p.observed(4, c, s);
    if (c > 0 && t > 10) worst = std::max(worst, s / 0.020);
    last = c;
  }
  // Against the pace now, the steps would reach 2.5 x 36 ms = 4.5x 20 ms.
  CHECK(worst <= 2.6);
  CHECK(last >= 1);
  // Past the target on their own (contexts grew past 2.5x), the prompt is
  // still read, a little at a time.
  for (int i = 0; i < 20; ++i) {
    const int c = p.chunk(4);
    p.observed(4, c, 0.060 + 0.002 * c);
    last = c == 0 ? last : c;
  }
  CHECK(last >= 1);
  // A read that ended (decode-only steps not asked for) sets a new
  // reference at the next: the chunk again sizes against 60 ms.
  for (int i = 0; i < 8; ++i) p.observed(4, 0, 0.060);
  for (int i = 0; i < 30; ++i) {
    const int c = p.chunk(4);
    p.observed(4, c, 0.060 + 0.002 * c);
    last = c == 0 ? last : c;
  }
  CHECK(last >= 40);  // (2.5 - 1) x 60 ms / 2 ms = 45 rows
}
