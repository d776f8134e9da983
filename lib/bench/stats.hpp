// Statistics for step-by-step benchmarks: median and spread of repeats, and
// whether two configurations differ by more than the noise between repeats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/stats.hpp"

namespace epyctune::bench {

struct Summary {
  double median = 0, min = 0, max = 0;
  double spread = 0;  // (max - min) / median: the relative range of the repeats
  int n = 0;
};
Summary summarize(std::vector<double> v);  // empty -> all zero
using common::median;                      // one definition, in lib/common

// Two-sided Mann-Whitney U test of "a and b come from the same distribution".
// Exact null distribution when there are no ties and n_a * n_b <= 400, else
// the normal approximation with tie correction and continuity correction.
struct MannWhitney {
  double u = 0;  // U of a (pairs where a > b, ties count one half)
  double p = 1;  // two-sided
  bool exact = false;
};
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

// Samples of one configuration: one group per repeat (run), each holding that
// run's within-run samples (e.g. tok/s of consecutive blocks of tokens).
using Runs = std::vector<std::vector<double>>;

// Percentile CI of median(b) - median(a) by a two-stage bootstrap: resample
// runs with replacement, then samples within each chosen run. Resampling runs
// keeps run-to-run drift in the interval, so drift does not pass for an effect.
struct DiffCi {
  double diff = 0;  // median(b) - median(a) over the pooled samples
  double lo = 0, hi = 0;
  double level = 0.95;
};
DiffCi bootstrap_median_diff(const Runs& a, const Runs& b, int iterations = 2000,
                             double level = 0.95, uint64_t seed = 1);

enum class Verdict { within_noise, significant, not_enough_data };
const char* verdict_name(Verdict v);  // "within noise" | "significant" | "not enough data"

struct Comparison {
  DiffCi ci;
  MannWhitney mw;  // on the per-run values, reported beside the verdict
  Verdict verdict = Verdict::not_enough_data;
};
// The verdict is the bootstrap CI: "significant" when it excludes 0, "within
// noise" when it holds 0; "not enough data" with fewer than 2 samples a side.
Comparison compare(const Runs& a, const Runs& b, uint64_t seed = 1);

}  // namespace epyctune::bench
