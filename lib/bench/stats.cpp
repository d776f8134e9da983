#include "bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace epyctune::bench {

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int>(v.size());
  s.median = median(v);
  s.min = v.front();
  s.max = v.back();
  s.spread = s.median != 0 ? (s.max - s.min) / s.median : 0;
  return s;
}

namespace {

// Number of orderings of (n, m) with U <= u, by the recurrence
// f(n, m, u) = f(n-1, m, u-m) + f(n, m-1, u), tabulated over u.
double exact_cdf(int n, int m, double u_obs) {
  const int umax = n * m;
  // dp[i][j][u]: counts for sizes i, j. Built row by row over i, j.
  std::vector<std::vector<std::vector<double>>> dp(
      n + 1, std::vector<std::vector<double>>(m + 1, std::vector<double>(umax + 1, 0)));
  for (int i = 0; i <= n; ++i)
    for (int j = 0; j <= m; ++j)
      for (int u = 0; u <= umax; ++u) {
        if (i == 0 || j == 0) {
          dp[i][j][u] = u == 0 ? 1 : 0;
          continue;
        }
        double c = dp[i][j - 1][u];
        if (u - j >= 0) c += dp[i - 1][j][u - j];
        dp[i][j][u] = c;
      }
  double total = 0, below = 0;
  for (int u = 0; u <= umax; ++u) {
    total += dp[n][m][u];
    if (u <= u_obs + 1e-9) below += dp[n][m][u];
  }
  return below / total;
}

}  // namespace

MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitney r;
  const size_t n = a.size(), m = b.size();
  if (n == 0 || m == 0) return r;
  bool ties = false;
  for (double x : a)
    for (double y : b) {
      if (x > y) r.u += 1;
      if (x == y) r.u += 0.5, ties = true;
    }
  // Ties inside one sample matter for the variance too.
  std::vector<double> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    i = j;
  }
  const double nm = static_cast<double>(n * m);
  if (!ties && n * m <= 400) {
    const double lo = std::min(r.u, nm - r.u);
    r.p = std::min(1.0, 2 * exact_cdf(static_cast<int>(n), static_cast<int>(m), lo));
    r.exact = true;
    return r;
  }
  const double N = static_cast<double>(n + m);
  const double var = nm / 12.0 * ((N + 1) - tie_term / (N * (N - 1)));
  if (var <= 0) return r;  // every value equal: no evidence of a difference
  const double z = (std::abs(r.u - nm / 2) - 0.5) / std::sqrt(var);
  r.p = std::min(1.0, std::erfc(std::max(0.0, z) / std::sqrt(2.0)));
  return r;
}

namespace {
std::vector<double> pooled(const Runs& r) {
  std::vector<double> out;
  for (const auto& run : r) out.insert(out.end(), run.begin(), run.end());
  return out;
}

double resampled_median(const Runs& r, std::mt19937_64& rng, std::vector<double>& buf) {
  buf.clear();
  std::uniform_int_distribution<size_t> pick_run(0, r.size() - 1);
  for (size_t i = 0; i < r.size(); ++i) {
    const auto& run = r[pick_run(rng)];
    if (run.empty()) continue;
    std::uniform_int_distribution<size_t> pick(0, run.size() - 1);
    for (size_t k = 0; k < run.size(); ++k) buf.push_back(run[pick(rng)]);
  }
  return median(buf);
}
}  // namespace

DiffCi bootstrap_median_diff(const Runs& a, const Runs& b, int iterations, double level,
                             uint64_t seed) {
  DiffCi ci;
  ci.level = level;
  ci.diff = median(pooled(b)) - median(pooled(a));
  if (a.empty() || b.empty() || iterations < 1) {
    ci.lo = ci.hi = ci.diff;
    return ci;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> diffs, buf;
  diffs.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const double ma = resampled_median(a, rng, buf);
    const double mb = resampled_median(b, rng, buf);
    diffs.push_back(mb - ma);
  }
  std::sort(diffs.begin(), diffs.end());
  const double tail = (1 - level) / 2;
  auto at = [&](double q) {
    const size_t i = static_cast<size_t>(
        std::clamp(q * (diffs.size() - 1), 0.0, static_cast<double>(diffs.size() - 1)));
    return diffs[i];
  };
  ci.lo = at(tail);
  ci.hi = at(1 - tail);
  return ci;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::within_noise:
      return "within noise";
    case Verdict::significant:
      return "significant";
    case Verdict::not_enough_data:
      return "not enough data";
  }
  return "?";
}

Comparison compare(const Runs& a, const Runs& b, uint64_t seed) {
  Comparison c;
  const auto pa = pooled(a), pb = pooled(b);
  std::vector<double> ra, rb;
  for (const auto& r : a) ra.push_back(median(r));
  for (const auto& r : b) rb.push_back(median(r));
  c.mw = mann_whitney(ra, rb);
  c.ci = bootstrap_median_diff(a, b, 2000, 0.95, seed);
  if (pa.size() < 2 || pb.size() < 2) return c;
  c.verdict = (c.ci.lo > 0 || c.ci.hi < 0) ? Verdict::significant : Verdict::within_noise;
  return c;
}

}  // namespace epyctune::bench
