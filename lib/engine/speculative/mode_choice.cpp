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

launch::LaunchPlan choose_mode(const ModeChoiceInput& in) {
  launch::LaunchPlan plan = in.automatic;
  if (!plan.partitioned()) return plan;
  std::vector<int> all = plan.draft.cpus;
  all.insert(all.end(), plan.verify.cpus.begin(), plan.verify.cpus.end());
  std::sort(all.begin(), all.end());
  const auto ts = cached(in.target_path, all, in.isa), ds = cached(in.draft_path, all, in.isa);
  const auto tp = cached(in.target_path, plan.verify.cpus, in.isa);
  const auto dp = cached(in.draft_path, plan.draft.cpus, in.isa);
  if (!ts || !ds || !tp || !dp || ts->n.back() < in.max_k + 1 || tp->n.back() < in.max_k + 1) {
    plan.reason +=
        "; no measured figures for both modes yet (run once shared and once partitioned "
        "to let auto choose from them)";
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
  // Shared: one side on every CPU, its L3 domains those of both sides.
  launch::LaunchPlan s = plan;
  s.verify.cpus = all;
  s.verify.l3.insert(s.verify.l3.end(), plan.draft.l3.begin(), plan.draft.l3.end());
  std::sort(s.verify.l3.begin(), s.verify.l3.end());
  s.verify.l3.erase(std::unique(s.verify.l3.begin(), s.verify.l3.end()), s.verify.l3.end());
  s.draft = launch::Side{launch::Role::draft};
  s.reason = why;
  return s;
}

}  // namespace epyctune::engine::speculative
