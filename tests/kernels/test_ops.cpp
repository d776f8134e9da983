// Float ops against straightforward double-precision formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/kernels.hpp"

using namespace epyctune::engine::kernels;

namespace {
std::vector<float> randv(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST_CASE("rmsnorm, dot, axpy, add, silu_mul") {
  for (int n : {1, 15, 16, 17, 100, 4096}) {
    CAPTURE(n);
    const auto x = randv(n, 1), w = randv(n, 2);
    std::vector<float> out(static_cast<size_t>(n));
    rmsnorm(out.data(), x.data(), w.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i)
      REQUIRE(out[i] == doctest::Approx(x[i] * scale * w[i]).epsilon(1e-5));

    double dot = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      dot += double(x[i]) * w[i];
      mag += std::fabs(double(x[i]) * w[i]);
    }
    CHECK(std::fabs(dot_f32(x.data(), w.data(), n) - dot) <= 1e-6 * mag);

    std::vector<float> y = w;
    axpy(y.data(), 0.5f, x.data(), n);
    for (int i = 0; i < n; ++i) REQUIRE(y[i] == w[i] + 0.5f * x[i]);
    y = w;
    add(y.data(), x.data(), n);
    for (int i = 0; i < n; ++i) REQUIRE(y[i] == w[i] + x[i]);
    y = x;
    silu_mul(y.data(), w.data(), n);
    for (int i = 0; i < n; ++i) {
      REQUIRE(y[i] == doctest::Approx(x[i] / (1.0 + std::exp(-double(x[i]))) * w[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("dot_f32 and axpy give the scalar reference's bits on every ISA") {
  const Isa saved = active_isa();
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 128, 130, 257}) {
    CAPTURE(n);
    auto a = randv(n, 3 + n), b = randv(n, 4 + n);
    // Signed zeros, subnormal products and wide magnitudes where rounding
    // order shows.
    for (int i = 0; i < n; i += 5) a[i] = i % 2 ? -0.0f : std::ldexp(a[i], (i % 40) - 20);
    for (int i = 3; i < n; i += 7) b[i] = 1e-30f * b[i];
    const float want = detail::dot_f32_ref(a.data(), b.data(), n);
    std::vector<float> want_y = b;
    detail::axpy_ref(want_y.data(), -0.37f, a.data(), n);
    for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
      const Isa isa = static_cast<Isa>(i);
      CAPTURE(std::string(isa_name(isa)));
      set_isa(isa);
      CHECK(bits(dot_f32(a.data(), b.data(), n)) == bits(want));
      std::vector<float> y = b;
      axpy(y.data(), -0.37f, a.data(), n);
      bool same = true;
      for (int j = 0; j < n; ++j) same = same && bits(y[j]) == bits(want_y[j]);
      CHECK(same);
    }
  }
  set_isa(saved);
}

TEST_CASE("exp_f32 is within 2 ulp of e^x and saturates cleanly") {
  auto ulps = [](float got, double want) {
    const float w = static_cast<float>(want);
    return std::fabs(double(got) - want) / std::fabs(double(std::nextafter(w, INFINITY)) - w);
  };
  double worst = 0;
  // About 1.5 million points, 1e-4 apart relatively, over [-87.3, 88.7]: both
  // ends of the reduction's n range and the tiny arguments around 0.
  for (float x = -87.3f; x < 88.7f; x = std::nextafter(x + 1e-4f * std::fabs(x) + 1e-30f, 100.0f)) {
    const double u = ulps(exp_f32(x), std::exp(double(x)));
    worst = std::max(worst, u);
    if (u > 2) {
      CAPTURE(x);
      REQUIRE(u <= 2);
    }
  }
  MESSAGE("worst error ", worst, " ulp");
  CHECK(exp_f32(0.0f) == 1.0f);
  CHECK(exp_f32(-0.0f) == 1.0f);
  CHECK(exp_f32(89.0f) == INFINITY);
  CHECK(exp_f32(INFINITY) == INFINITY);
  CHECK(exp_f32(-88.0f) == 0.0f);
  CHECK(exp_f32(-INFINITY) == 0.0f);
  CHECK(std::isnan(exp_f32(NAN)));
  CHECK(std::isfinite(exp_f32(88.72f)));
}

TEST_CASE("softmax, silu_mul and attend give the scalar reference's bits on every ISA") {
  const Isa saved = active_isa();
  for (int n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257}) {
    CAPTURE(n);
    auto x = randv(n, 11 + n), up = randv(n, 12 + n);
    // Wide arguments: exp's overflow, underflow and both ends of its range.
    for (int i = 0; i < n; i += 3) x[i] *= 50.0f;
    if (n > 4) x[4] = -0.0f;
    const int hd = 64;
    const auto q = randv(hd, 5 + n), keys = randv(n * hd, 6 + n), vals = randv(n * hd, 7 + n);
    std::vector<float> want_soft = x, want_silu = x, want_out(hd), scratch(n);
    detail::softmax_ref(want_soft.data(), n);
    detail::silu_mul_ref(want_silu.data(), up.data(), n);
    detail::attend_ref(q.data(), keys.data(), vals.data(), n, hd, 0.125f, scratch.data(),
                       want_out.data());
    // attend is dot, softmax and axpy, in that order.
    std::vector<float> sc(n), by_parts(hd, 0.0f);
    for (int j = 0; j < n; ++j)
      sc[j] = detail::dot_f32_ref(q.data(), &keys[size_t(j) * hd], hd) * 0.125f;
    detail::softmax_ref(sc.data(), n);
    for (int j = 0; j < n; ++j) detail::axpy_ref(by_parts.data(), sc[j], &vals[size_t(j) * hd], hd);
    CHECK(same_bits(by_parts, want_out));
    for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
      const Isa isa = static_cast<Isa>(i);
      CAPTURE(std::string(isa_name(isa)));
      set_isa(isa);
      auto y = x;
      softmax(y.data(), n);
      CHECK(same_bits(y, want_soft));
      y = x;
      silu_mul(y.data(), up.data(), n);
      CHECK(same_bits(y, want_silu));
      std::vector<float> out(hd, 1.0f);
      attend(q.data(), keys.data(), vals.data(), n, hd, 0.125f, scratch.data(), out.data());
      CHECK(same_bits(out, want_out));
    }
  }
  set_isa(saved);
}

// softmax finds its max W lanes at a time: the same number whatever the
// order, so special values must not tell the ISAs apart either.
TEST_CASE("softmax keeps the reference's bits with ties, zeros of both signs, -inf and NaN") {
  const Isa saved = active_isa();
  const float inf = INFINITY, nan = NAN;
  std::vector<std::vector<float>> cases;
  for (int n : {5, 16, 17, 40}) {
    std::vector<float> zeros(size_t(n), -1.0f);
    zeros[size_t(n) / 2] = -0.0f;
    zeros[size_t(n) - 1] = 0.0f;
    cases.push_back(zeros);
    auto neg0_first = zeros;
    neg0_first[0] = -0.0f;
    cases.push_back(neg0_first);
    std::vector<float> ties(size_t(n), 3.0f);
    cases.push_back(ties);
    cases.push_back(std::vector<float>(size_t(n), -inf));
    auto nan_later = randv(n, 40 + n);
    nan_later[size_t(n) - 2] = nan;
    cases.push_back(nan_later);
    auto nan_first = randv(n, 41 + n);
    nan_first[0] = nan;
    cases.push_back(nan_first);
    auto one_inf = randv(n, 42 + n);
    one_inf[size_t(n) / 3] = -inf;
    cases.push_back(one_inf);
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    auto want = cases[c];
    detail::softmax_ref(want.data(), int64_t(want.size()));
    if (std::isnan(cases[c][0]) || std::isnan(cases[c][cases[c].size() - 2]))
      CHECK(std::isnan(want[1]));
    if (cases[c][0] == 3.0f) CHECK(want[1] == want[0]);
    for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
      const Isa isa = static_cast<Isa>(i);
      CAPTURE(std::string(isa_name(isa)));
      set_isa(isa);
      auto y = cases[c];
      softmax(y.data(), int64_t(y.size()));
      CHECK(same_bits(y, want));
    }
  }
  set_isa(saved);
}

// nq queries (seeds from `seed`) against n_pos positions of f32 keys and
// values, prefixes from n0 by 2 and near n_pos (ending on and between
// whole vectors); attend(q, ns, nq, scratch, out) must give each
// attend_ref's bits on every ISA.
template <class Attend>
void check_attend_queries(const std::vector<float>& keys, const std::vector<float>& vals, int hd,
                          int n_pos, int nq, uint32_t seed, int n0, Attend attend) {
  std::vector<std::vector<float>> qs, want;
  std::vector<int64_t> ns;
  for (int i = 0; i < nq; ++i) {
    qs.push_back(randv(hd, seed + 7 * i + hd));
    for (auto& v : qs.back()) v *= 3.0f;  // sharper softmax: the sum's order shows
    ns.push_back(i % 3 == 2 ? n_pos - 5 + i / 3 : std::min(n_pos, n0 + 2 * i));
    want.emplace_back(hd);
    std::vector<float> scratch(size_t(ns.back()));
    detail::attend_ref(qs.back().data(), keys.data(), vals.data(), ns.back(), hd, 0.125f,
                       scratch.data(), want.back().data());
  }
  std::vector<const float*> qp;
  for (auto& q : qs) qp.push_back(q.data());
  for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
    const Isa isa = static_cast<Isa>(i);
    CAPTURE(std::string(isa_name(isa)));
    set_isa(isa);
    std::vector<std::vector<float>> got(size_t(nq), std::vector<float>(size_t(hd), 7.0f));
    std::vector<float*> op;
    for (auto& o : got) op.push_back(o.data());
    std::vector<float> scratch(size_t(kAttendTile) * n_pos, -1.0f);
    attend(qp.data(), ns.data(), nq, scratch.data(), op.data());
    for (int q = 0; q < nq; ++q) {
      CAPTURE(q);
      CHECK(same_bits(got[size_t(q)], want[size_t(q)]));
    }
  }
}

// The shared-KV attention tiles kAttendTile queries over one pass of the
// keys and values, and must give each query the reference's one-head bits:
// head dims that tile (64, 128) and one that does not (80), tile counts
// with 2- and 1-query remainders, and queries that see different prefixes
// (the rows of a sequence in one pass, causal).
TEST_CASE("attend_shared gives every query attend's bits, on every ISA") {
  const Isa saved = active_isa();
  for (int hd : {64, 128, 80}) {
    // Prefixes that end on and between whole vectors of 8 and 16 positions.
    const int n_pos = 53;
    const auto keys = randv(n_pos * hd, 21 + hd), vals = randv(n_pos * hd, 22 + hd);
    for (int nq : {1, 2, 3, 4, 5, 7, 9}) {
      CAPTURE(hd);
      CAPTURE(nq);
      check_attend_queries(
          keys, vals, hd, n_pos, nq, 100, 16,
          [&](const float* const* q, const int64_t* ns, int n, float* scratch, float* const* out) {
            attend_shared(q, ns, n, keys.data(), vals.data(), hd, 0.125f, scratch, out);
          });
    }
  }
  set_isa(saved);
}

// The KV cache's f16 blocks are read in place: pages of kKvPagePositions
// rows, in any order in memory, the last one partly filled (its other rows
// hold anything). Each query must get the bits attend gives on the same
// halves converted to f32 first.
TEST_CASE("attend_pages reads f16 pages in place with attend's bits, on every ISA") {
  const Isa saved = active_isa();
  for (int hd : {64, 128}) {
    const int n_pos = 53, n_pages = (n_pos + kKvPagePositions - 1) / kKvPagePositions;
    const size_t page_halves = size_t(kKvPagePositions) * hd;
    // Pages stored in reverse in one arena, garbage past the last position.
    std::vector<uint16_t> k_arena(n_pages * page_halves, 0x7e00), v_arena(k_arena);
    std::vector<float> keys(size_t(n_pos) * hd), vals(keys.size());
    const auto kr = randv(n_pos * hd, 31 + hd), vr = randv(n_pos * hd, 32 + hd);
    std::vector<const uint16_t*> kp, vp;
    for (int p = 0; p < n_pages; ++p) {
      kp.push_back(k_arena.data() + size_t(n_pages - 1 - p) * page_halves);
      vp.push_back(v_arena.data() + size_t(n_pages - 1 - p) * page_halves);
    }
    for (int j = 0; j < n_pos; ++j)
      for (int e = 0; e < hd; ++e) {
        const size_t i = size_t(j) * hd + e;
        const size_t at = size_t(n_pages - 1 - j / kKvPagePositions) * page_halves +
                          size_t(j % kKvPagePositions) * hd + e;
        k_arena[at] = detail::f32_to_fp16(kr[i]);
        v_arena[at] = detail::f32_to_fp16(vr[i]);
        keys[i] = detail::fp16_to_f32(k_arena[at]);
        vals[i] = detail::fp16_to_f32(v_arena[at]);
      }
    CHECK(attend_pages_supported(hd));
    for (int nq : {1, 2, 3, 4, 5, 9}) {
      CAPTURE(hd);
      CAPTURE(nq);
      check_attend_queries(
          keys, vals, hd, n_pos, nq, 200, 15,
          [&](const float* const* q, const int64_t* ns, int n, float* scratch, float* const* out) {
            attend_pages(q, ns, n, kp.data(), vp.data(), hd, 0.125f, scratch, out);
          });
    }
  }
  CHECK_FALSE(attend_pages_supported(80));
  set_isa(saved);
}

TEST_CASE("softmax sums to one and keeps order") {
  for (int n : {1, 7, 16, 33, 1000}) {
    auto x = randv(n, 3);
    for (auto& v : x) v *= 10;
    const auto orig = x;
    softmax(x.data(), n);
    double s = 0;
    for (float v : x) s += v;
    CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
    for (int i = 1; i < n; ++i) REQUIRE((orig[i] > orig[0]) == (x[i] > x[0]));
  }
  std::vector<float> big = {1000.0f, 1000.0f};
  softmax(big.data(), 2);
  CHECK(big[0] == 0.5f);
}

TEST_CASE("rope rotates pairs by pos * base^(-2i/n_rot)") {
  const int hd = 8;
  for (bool neox : {false, true}) {
    auto h = randv(hd, 4);
    const auto orig = h;
    rope(h.data(), hd, hd, 0, 10000.0f, 1.0f, neox);
    for (int i = 0; i < hd; ++i) CHECK(h[i] == orig[i]);  // position 0 is the identity
    rope(h.data(), hd, hd, 3, 10000.0f, 1.0f, neox);
    for (int i = 0; i < hd / 2; ++i) {
      const int i0 = neox ? i : 2 * i, i1 = neox ? i + hd / 2 : 2 * i + 1;
      const double th = 3.0 * std::pow(10000.0, -2.0 * i / hd);
      CHECK(h[i0] ==
            doctest::Approx(orig[i0] * std::cos(th) - orig[i1] * std::sin(th)).epsilon(1e-5));
      CHECK(h[i1] ==
            doctest::Approx(orig[i0] * std::sin(th) + orig[i1] * std::cos(th)).epsilon(1e-5));
    }
  }
  // Partial rotation leaves dimensions past n_rot alone.
  auto h = randv(hd, 5);
  const auto orig = h;
  rope(h.data(), hd, 4, 5, 10000.0f, 1.0f, false);
  for (int i = 4; i < hd; ++i) CHECK(h[i] == orig[i]);
  CHECK(h[0] != orig[0]);
}
