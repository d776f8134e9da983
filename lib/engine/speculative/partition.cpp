#include "engine/speculative/partition.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "common/cpulist.hpp"
#include "common/field_error.hpp"

namespace epyctune::engine::speculative {

namespace {
using common::FieldError;

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
std::vector<int> default_draft(const PartitionRequest& in, int n_domains) {
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
std::string domains_text(const PartitionRequest& in, const std::vector<int>& draft) {
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

namespace {
// One side of the engine's own plan: its CPUs and the L3 domains they are on.
launch::Side side_of(launch::Role role, std::vector<int> cpus, const PartitionRequest& in) {
  launch::Side s{role};
  std::set<int> l3;
  for (size_t i = 0; i < in.cpus.size() && i < in.l3_ids.size(); ++i)
    if (in.l3_ids[i] >= 0 && std::find(cpus.begin(), cpus.end(), in.cpus[i]) != cpus.end())
      l3.insert(in.l3_ids[i]);
  s.l3.assign(l3.begin(), l3.end());
  s.cpus = std::move(cpus);
  return s;
}

launch::LaunchPlan shared_plan(const PartitionRequest& in, std::string reason) {
  launch::LaunchPlan p;
  p.has_spec = true;
  p.verify = side_of(launch::Role::verify, in.cpus, in);
  p.reason = std::move(reason);
  return p;
}
}  // namespace

launch::LaunchPlan pick_partition(const PartitionRequest& in) {
  if (in.cpus.empty()) throw FieldError("cpus", "no CPU to run on");
  if (!in.l3_ids.empty() && in.l3_ids.size() != in.cpus.size())
    throw std::invalid_argument("pick_partition: l3_ids must parallel cpus");
  std::set<int> domains;
  for (int id : in.l3_ids)
    if (id >= 0) domains.insert(id);
  const bool l3_known = !in.l3_ids.empty() && std::none_of(in.l3_ids.begin(), in.l3_ids.end(),
                                                           [](int i) { return i < 0; });
  const int n_domains = l3_known ? static_cast<int>(domains.size()) : 1;

  const bool explicit_split = in.draft_cpus.has_value() || in.verify_cpus.has_value();
  if (!in.has_draft_model)
    return shared_plan(in, "no draft model: the target runs alone on all CPUs");
  if (in.request == ModeRequest::shared) {
    if (explicit_split)
      throw FieldError("draft_cpus",
                       "a draft or verify partition needs the partitioned or auto mode (shared "
                       "runs both models on all the CPUs)");
    return shared_plan(in, "requested: draft and target alternate on all CPUs");
  }
  if (in.request == ModeRequest::automatic && !explicit_split && in.cpus.size() < 2)
    return shared_plan(in, "auto: one CPU, nothing to partition; draft and target alternate");
  if (in.cpus.size() < 2 && !explicit_split)
    throw FieldError("spec_mode", "partitioned needs at least 2 CPUs");

  std::vector<int> draft = in.draft_cpus ? *in.draft_cpus : std::vector<int>{};
  std::vector<int> verify = in.verify_cpus ? *in.verify_cpus : std::vector<int>{};
  if (!in.draft_cpus)
    draft = in.verify_cpus ? minus(in.cpus, verify) : default_draft(in, n_domains);
  if (!in.verify_cpus) verify = minus(in.cpus, draft);
  if (draft.empty()) throw FieldError("draft_cpus", "the draft partition is empty");
  if (verify.empty()) throw FieldError("verify_cpus", "the verify partition is empty");
  for (int c : draft)
    if (std::find(verify.begin(), verify.end(), c) != verify.end())
      throw FieldError("draft_cpus", "overlaps the verify partition on CPU " + std::to_string(c) +
                                         ": partitions must be disjoint");
  launch::LaunchPlan p;
  p.has_spec = true;
  p.draft = side_of(launch::Role::draft, draft, in);
  p.verify = side_of(launch::Role::verify, verify, in);
  p.reason = explicit_split ? "partitions given on the command line"
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
  return p;
}

}  // namespace epyctune::engine::speculative
