#include "bench/stepwise.hpp"

#include <fmt/format.h>

namespace epyctune::bench {

std::vector<double> block_rates(const std::vector<double>& per_token_ms, int block) {
  std::vector<double> out;
  if (block < 1) block = 1;
  for (size_t i = 0; i + static_cast<size_t>(block) <= per_token_ms.size();
       i += static_cast<size_t>(block)) {
    double ms = 0;
    for (int k = 0; k < block; ++k) ms += per_token_ms[i + static_cast<size_t>(k)];
    if (ms > 0) out.push_back(block * 1e3 / ms);
  }
  return out;
}

namespace {

struct StockGuard {
  StepDriver& d;
  bool armed = true;
  ~StockGuard() {
    if (!armed) return;
    try {
      d.to_stock();
    } catch (...) {
      // The caller's exception is the one to report; to_stock is retried by
      // the caller's own cleanup (revert is idempotent).
    }
  }
};

Runs runs_of(const Row& r) {
  Runs out;
  for (const auto& s : r.samples)
    out.push_back(s.block_tok_s.empty() ? std::vector<double>{s.tok_s} : s.block_tok_s);
  return out;
}

void measure_row(StepDriver& d, Row& row, const StepwiseOptions& o, int round) {
  if (o.progress)
    o.progress(fmt::format("round {}/{}: measuring {} ({})", round + 1, o.repeat, row.ref.name,
                           row.ref.title));
  row.bandwidth_samples_gbps.push_back(d.bandwidth_gbps(row.ref));
  row.samples.push_back(d.measure(row.ref));
}

}  // namespace

const char* row_state_name(RowState s) {
  switch (s) {
    case RowState::measured:
      return "measured";
    case RowState::skipped:
      return "skipped";
    case RowState::needs_reboot:
      return "needs reboot";
    case RowState::unsupported:
      return "unsupported";
  }
  return "?";
}

std::string Row::status() const {
  if (measured()) return "measured";
  return fmt::format("{}: {}", row_state_name(state), reason);
}

StepwiseResult run_stepwise(StepDriver& d, const StepwiseOptions& o) {
  StepwiseResult res;
  auto row_of = [](StepRef ref) {
    Row r;
    r.ref = std::move(ref);
    return r;
  };
  res.rows.push_back(row_of({0, "stock", "nothing applied"}));
  for (const auto& s : o.steps) res.rows.push_back(row_of(s));
  StockGuard guard{d};
  for (int round = 0; round < o.repeat; ++round) {
    d.to_stock();
    for (size_t i = 0; i < res.rows.size(); ++i) {
      if (d.interrupted()) {
        res.interrupted = true;
        d.to_stock();
        guard.armed = false;
        return res;
      }
      Row& row = res.rows[i];
      if (i > 0) {
        if (o.progress && round == 0) o.progress(fmt::format("applying step {}", row.ref.name));
        StepOutcome out = d.apply_step(row.ref);
        if (round == 0) {
          row.state = out.state;
          row.reason = std::move(out.reason);
        }
      }
      if (row.measured()) measure_row(d, row, o, round);
    }
    res.rounds = round + 1;
  }
  d.to_stock();
  guard.armed = false;
  analyse(res);
  return res;
}

void analyse(StepwiseResult& r) {
  int prev = -1;
  const Row* stock = nullptr;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    Row& row = r.rows[i];
    if (!row.measured() || row.samples.empty()) continue;
    std::vector<double> tps;
    for (const auto& s : row.samples) tps.push_back(s.tok_s);
    row.tok_s = summarize(tps);
    row.bandwidth_gbps = median(row.bandwidth_samples_gbps);
    const Sample& last = row.samples.back();
    if (last.bytes_per_token > 0)
      row.roofline_tok_s = row.bandwidth_gbps * 1e9 / last.bytes_per_token * last.tokens_per_pass;
    row.cpus = last.cpus;
    row.note = last.note;
    row.prev = prev;
    if (prev >= 0) {
      const Row& p = r.rows[static_cast<size_t>(prev)];
      row.vs_prev = compare(runs_of(p), runs_of(row), 1 + i);
      row.delta_prev = p.tok_s.median > 0 ? row.tok_s.median / p.tok_s.median - 1 : 0;
    }
    if (stock && &row != stock) {
      row.vs_stock = compare(runs_of(*stock), runs_of(row), 101 + i);
      row.delta_stock = stock->tok_s.median > 0 ? row.tok_s.median / stock->tok_s.median - 1 : 0;
    }
    if (i == 0) stock = &row;
    prev = static_cast<int>(i);
  }
}

}  // namespace epyctune::bench
