#include "engine/speculative/mode_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "common/cpulist.hpp"
#include "engine/speculative/cost_model.hpp"

namespace epyctune::engine::speculative {

double best_rate(const CostModel& c, int max_k, double accept) {
  return std::max(1.0 / c.verify_seconds(0), best_draft_k(c, max_k, accept).tokens_per_s);
}

namespace {
std::optional<PassTimes> cached(const std::string& model, const std::vector<int>& cpus,
                                const std::string& isa) {
  const std::string key = cost_cache_key(model, common::format_cpulist(cpus), isa);
  const auto dir = cost_cache_dir();
  if (dir.empty()) return std::nullopt;
  return read_cost_cache(cost_cache_file(dir, key), key);
}
}  // namespace

CpuPlan choose_mode(const ModeChoiceInput& in) {
  CpuPlan plan = in.automatic;
  if (plan.mode != SpecMode::partitioned) return plan;
  std::vector<int> all = plan.draft_cpus;
  all.insert(all.end(), plan.verify_cpus.begin(), plan.verify_cpus.end());
  std::sort(all.begin(), all.end());
  const auto ts = cached(in.target_path, all, in.isa), ds = cached(in.draft_path, all, in.isa);
  const auto tp = cached(in.target_path, plan.verify_cpus, in.isa);
  const auto dp = cached(in.draft_path, plan.draft_cpus, in.isa);
  if (!ts || !ds || !tp || !dp || ts->n.back() < in.max_k + 1 || tp->n.back() < in.max_k + 1) {
    plan.reason +=
        "; no measured figures for both modes yet (run once with --spec-mode shared "
        "and once partitioned to let auto choose from them)";
    return plan;
  }
  CostModel shared, part;
  shared.target = *ts, shared.draft_s = ds->at(1), shared.measured = true;
  part.target = *tp, part.draft_s = dp->at(1), part.overlap = part.measured = true;
  const double rs = best_rate(shared, in.max_k, in.accept);
  const double rp = best_rate(part, in.max_k, in.accept);
  const std::string why = fmt::format(
      "auto from measured costs: predicted {:.2f} tok/s shared vs {:.2f} partitioned "
      "at acceptance {:.1f}",
      rs, rp, in.accept);
  if (rp >= rs) {
    plan.reason = why;
    return plan;
  }
  CpuPlan s;
  s.mode = SpecMode::shared;
  s.shared_cpus = all;
  s.reason = why;
  return s;
}

}  // namespace epyctune::engine::speculative
