#include "engine/speculative/cpu_plan.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>

#include "common/cpulist.hpp"

namespace epyctune::engine::speculative {

ModeRequest parse_mode_request(std::string_view s) {
  if (s == "shared") return ModeRequest::shared;
  if (s == "partitioned") return ModeRequest::partitioned;
  if (s == "auto") return ModeRequest::automatic;
  throw std::invalid_argument("--spec-mode '" + std::string(s) +
                              "': expected partitioned, shared or auto");
}

namespace {
std::vector<int> minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int c : a)
    if (std::find(b.begin(), b.end(), c) == b.end()) out.push_back(c);
  return out;
}

// How many of `units` the draft owns: its share, rounded, leaving the target
// at least one.
int draft_units(double share, int units) {
  const int n = static_cast<int>(std::lround(share * units));
  return std::clamp(n, 1, units - 1);
}

// The draft's default partition: whole L3 domains from the last one when
// there are several (its own caches and its own share of memory traffic),
// else CPUs from the last one.
std::vector<int> default_draft(const CpuPlanInput& in, int n_domains) {
  if (n_domains >= 2) {
    std::vector<int> order;  // domain ids, last CPU's first
    for (auto i = in.l3_ids.rbegin(); i != in.l3_ids.rend(); ++i)
      if (std::find(order.begin(), order.end(), *i) == order.end()) order.push_back(*i);
    order.resize(static_cast<size_t>(draft_units(in.draft_share, n_domains)));
    std::vector<int> out;
    for (size_t i = 0; i < in.cpus.size(); ++i)
      if (std::find(order.begin(), order.end(), in.l3_ids[i]) != order.end())
        out.push_back(in.cpus[i]);
    return out;
  }
  const int n = draft_units(in.draft_share, static_cast<int>(in.cpus.size()));
  return {in.cpus.end() - n, in.cpus.end()};
}

// "its own" or "N", for the reason: the L3 domains the draft's CPUs are on.
std::string domains_text(const CpuPlanInput& in, const std::vector<int>& draft) {
  std::set<int> ids;
  for (size_t i = 0; i < in.cpus.size(); ++i)
    if (std::find(draft.begin(), draft.end(), in.cpus[i]) != draft.end()) ids.insert(in.l3_ids[i]);
  return ids.size() == 1 ? "its own" : std::to_string(ids.size());
}
}  // namespace

double draft_share(uint64_t target_bytes, uint64_t draft_bytes, int k) {
  if (target_bytes == 0 || draft_bytes == 0 || k < 1) return 0.0;
  const double d = static_cast<double>(draft_bytes) * k;
  return d / (d + static_cast<double>(target_bytes));
}

CpuPlan plan_cpus(const CpuPlanInput& in) {
  if (in.cpus.empty()) throw std::invalid_argument("--cpus: no CPU to run on");
  if (!in.l3_ids.empty() && in.l3_ids.size() != in.cpus.size())
    throw std::invalid_argument("plan_cpus: l3_ids must parallel cpus");
  std::set<int> domains;
  for (int id : in.l3_ids)
    if (id >= 0) domains.insert(id);
  const bool l3_known = !in.l3_ids.empty() && std::none_of(in.l3_ids.begin(), in.l3_ids.end(),
                                                           [](int i) { return i < 0; });
  const int n_domains = l3_known ? static_cast<int>(domains.size()) : 1;

  CpuPlan plan;
  plan.shared_cpus = in.cpus;
  const bool explicit_split = in.draft_cpus.has_value() || in.verify_cpus.has_value();
  if (!in.has_draft_model) {
    plan.reason = "no draft model: the target runs alone on all CPUs";
    return plan;
  }
  if (in.request == ModeRequest::shared) {
    if (explicit_split)
      throw std::invalid_argument(
          "--draft-cpus/--verify-cpus need --spec-mode partitioned or auto (shared uses --cpus)");
    plan.reason = "requested: draft and target alternate on all CPUs";
    return plan;
  }
  if (in.request == ModeRequest::automatic && !explicit_split) {
    if (in.cpus.size() < 2) {
      plan.reason = "auto: one CPU, nothing to partition; draft and target alternate";
      return plan;
    }
  }
  if (in.cpus.size() < 2 && !explicit_split)
    throw std::invalid_argument("--spec-mode partitioned needs at least 2 CPUs (see --cpus)");

  std::vector<int> draft = in.draft_cpus ? *in.draft_cpus : std::vector<int>{};
  std::vector<int> verify = in.verify_cpus ? *in.verify_cpus : std::vector<int>{};
  if (!in.draft_cpus)
    draft = in.verify_cpus ? minus(in.cpus, verify) : default_draft(in, n_domains);
  if (!in.verify_cpus) verify = minus(in.cpus, draft);
  if (draft.empty()) throw std::invalid_argument("--draft-cpus: the draft partition is empty");
  if (verify.empty()) throw std::invalid_argument("--verify-cpus: the verify partition is empty");
  for (int c : draft)
    if (std::find(verify.begin(), verify.end(), c) != verify.end())
      throw std::invalid_argument("--draft-cpus and --verify-cpus overlap on CPU " +
                                  std::to_string(c) + ": partitions must be disjoint");
  plan.mode = SpecMode::partitioned;
  plan.draft_cpus = draft;
  plan.verify_cpus = verify;
  plan.shared_cpus.clear();
  plan.reason = explicit_split ? "partitions given on the command line"
                : in.request == ModeRequest::partitioned
                    ? "requested: draft on CPUs " + common::format_cpulist(draft)
                : n_domains >= 2
                    ? "auto: " + std::to_string(n_domains) + " L3 domains, the draft gets " +
                          domains_text(in, draft) + " (CPUs " + common::format_cpulist(draft) + ")"
                    : "auto: one L3 domain; the draft gets " +
                          std::string(draft.size() == 1 ? "CPU " : "CPUs ") +
                          common::format_cpulist(draft) +
                          " (two or more CPUs are partitioned: the draft runs ahead while "
                          "the target verifies)";
  return plan;
}

std::vector<int> read_l3_ids(const std::filesystem::path& root, const std::vector<int>& cpus) {
  std::vector<int> out;
  for (int c : cpus) {
    int id = -1;
    std::ifstream f(root / "sys/devices/system/cpu" / ("cpu" + std::to_string(c)) /
                    "cache/index3/id");
    if (!(f >> id) || id < 0) id = -1;  // unknown topology, never a guess
    out.push_back(id);
  }
  return out;
}

}  // namespace epyctune::engine::speculative
