#include "daemon/instances.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/cpulist.hpp"
#include "profile/resolve.hpp"

namespace epyctune::daemon {

namespace {

struct CpuFacts {
  std::map<int, int> l3, node;  // CPU -> L3 domain index, NUMA node
};

CpuFacts cpu_facts(const host::Topology& t) {
  CpuFacts f;
  for (const auto& c : t.cores)
    for (int cpu : c.cpus) {
      f.l3[cpu] = c.l3;
      f.node[cpu] = c.numa_node;
    }
  return f;
}

[[noreturn]] void fail(const Config& c, const InstanceConfig& i, const std::string& what) {
  throw ConfigError(fmt::format("{}:{}: [[instance]] {}: {}", c.source, i.line, i.name, what));
}

// `cpus` cut into `n` contiguous slices: whole L3 domains when there are at
// least n of them, else equal runs of CPUs (and `note` says so).
std::vector<std::vector<int>> slice(const std::vector<int>& cpus, size_t n, const CpuFacts& f,
                                    std::string& note) {
  std::vector<std::vector<int>> groups;
  int last = -2;
  for (int cpu : cpus) {
    auto it = f.l3.find(cpu);
    int l3 = it == f.l3.end() ? -1 : it->second;
    if (groups.empty() || l3 != last) groups.emplace_back();
    groups.back().push_back(cpu);
    last = l3;
  }
  std::vector<std::vector<int>> out(n);
  if (groups.size() >= n) {
    size_t g = 0;
    for (size_t k = 0; k < n; ++k) {
      size_t take = groups.size() / n + (k < groups.size() % n ? 1 : 0);
      for (size_t j = 0; j < take; ++j, ++g)
        out[k].insert(out[k].end(), groups[g].begin(), groups[g].end());
    }
    return out;
  }
  note =
      fmt::format("{} L3 domain(s) for {} instances: slices share an L3 cache", groups.size(), n);
  size_t pos = 0;
  for (size_t k = 0; k < n; ++k) {
    size_t take = cpus.size() / n + (k < cpus.size() % n ? 1 : 0);
    out[k].assign(cpus.begin() + static_cast<long>(pos),
                  cpus.begin() + static_cast<long>(pos + take));
    pos += take;
  }
  return out;
}

std::vector<int> minus(const std::vector<int>& a, const std::set<int>& b) {
  std::vector<int> out;
  for (int x : a)
    if (!b.count(x)) out.push_back(x);
  return out;
}

// A slice of one of the plan's sides: its facts come from the same
// derivation as the plan's own (profile::side_on).
launch::Side slice_side(const launch::Side& from, std::vector<int> cpus, int threads,
                        const host::Topology& topo) {
  launch::Side s = profile::side_on(from.role, std::move(cpus), topo);
  s.group = from.group;
  s.threads = threads > 0 ? std::min<int>(threads, static_cast<int>(s.cpus.size())) : 0;
  return s;
}

}  // namespace

std::vector<InstancePlan> carve_instances(const Config& c, const launch::LaunchPlan& plan,
                                          const host::Topology& topo) {
  if (c.instances.empty()) return {};
  if (!plan.has_spec)
    throw ConfigError(
        fmt::format("{}: the profile's launch plan has no partition, so there is no "
                    "CPU to run instances on: check the profile's [partition]",
                    c.source));
  const CpuFacts f = cpu_facts(topo);
  std::set<int> inference(plan.verify.cpus.begin(), plan.verify.cpus.end());
  inference.insert(plan.draft.cpus.begin(), plan.draft.cpus.end());

  // Explicit lists first: they are taken out of what the others share.
  std::set<int> claimed;
  for (const auto& i : c.instances)
    for (const auto* text : {&i.cpus, &i.draft_cpus})
      for (int cpu : common::parse_cpulist(*text)) {
        if (!inference.count(cpu))
          fail(c, i,
               fmt::format("CPU {} is not in the launch plan's partition ({}): use CPUs "
                           "of `epyctune plan`'s draft or verify side",
                           cpu, common::format_cpulist({inference.begin(), inference.end()})));
        claimed.insert(cpu);
      }
  std::vector<const InstanceConfig*> carve_verify, carve_draft;
  for (const auto& i : c.instances) {
    if (i.cpus.empty()) carve_verify.push_back(&i);
    if (!i.draft.empty() && i.draft_cpus.empty()) carve_draft.push_back(&i);
  }
  std::string vnote, dnote;
  auto vfree = minus(plan.verify.cpus, claimed);
  auto dfree = minus(plan.draft.cpus, claimed);
  if (vfree.size() < carve_verify.size())
    throw ConfigError(fmt::format(
        "{}: {} instance(s) share the plan's {} free verify CPU(s): too few; give instances "
        "explicit `cpus` or run fewer instances",
        c.source, carve_verify.size(), vfree.size()));
  if (dfree.size() < carve_draft.size())
    throw ConfigError(fmt::format(
        "{}: {} instance(s) with a draft share the plan's {} free draft CPU(s): too few; give "
        "them explicit `draft_cpus` or fewer drafts",
        c.source, carve_draft.size(), dfree.size()));
  auto vslices = slice(vfree, carve_verify.size(), f, vnote);
  auto dslices = slice(dfree, carve_draft.size(), f, dnote);

  std::vector<InstancePlan> out;
  std::map<int, std::string> owner;
  for (const auto& i : c.instances) {
    InstancePlan ip;
    ip.cfg = i;
    ip.launch_config = std::string(kInstanceDir) + "/" + i.name + ".toml";
    std::vector<int> vcpus, dcpus;
    if (!i.cpus.empty()) {
      vcpus = common::parse_cpulist(i.cpus);
    } else {
      size_t k = std::find(carve_verify.begin(), carve_verify.end(), &i) - carve_verify.begin();
      vcpus = vslices[k];
      ip.note = vnote;
    }
    if (!i.draft.empty()) {
      if (!i.draft_cpus.empty()) {
        dcpus = common::parse_cpulist(i.draft_cpus);
      } else {
        size_t k = std::find(carve_draft.begin(), carve_draft.end(), &i) - carve_draft.begin();
        dcpus = dslices[k];
        if (!dnote.empty()) ip.note += (ip.note.empty() ? "" : "; ") + dnote;
      }
    }
    for (const auto* side : {&vcpus, &dcpus})
      for (int cpu : *side) {
        auto [it, fresh] = owner.emplace(cpu, i.name);
        if (!fresh)
          fail(c, i,
               fmt::format("CPU {} is also used by instance {}: instances need disjoint "
                           "CPUs; change `cpus`/`draft_cpus`",
                           cpu, it->second));
      }
    ip.plan = plan;
    ip.plan.verify = slice_side(plan.verify, vcpus, i.threads, topo);
    // The launch config format needs a draft side even when no draft model
    // runs; the engine then starts no draft pool, so it names the verify
    // side's last CPU, which is never given to anyone else.
    ip.plan.draft = dcpus.empty() ? slice_side(plan.draft, {vcpus.back()}, 1, topo)
                                  : slice_side(plan.draft, dcpus, 0, topo);
    if (dcpus.empty() && vcpus.size() > 1) {
      ip.plan.verify.cpus.pop_back();
      if (ip.plan.verify.threads > static_cast<int>(ip.plan.verify.cpus.size()))
        ip.plan.verify.threads = 0;
    } else if (dcpus.empty()) {
      ip.plan.draft.group.clear();
    }
    ip.plan.weights.target_nodes =
        launch::target_weight_nodes(plan.weights.layout, ip.plan.verify.nodes);
    ip.plan.weights.draft_nodes = ip.plan.draft.nodes;
    ip.plan.has_models = true;
    ip.plan.models.target = i.model;
    ip.plan.models.draft = i.draft;
    ip.cpus = vcpus;
    ip.cpus.insert(ip.cpus.end(), dcpus.begin(), dcpus.end());
    std::sort(ip.cpus.begin(), ip.cpus.end());
    std::set<int> nodes;
    for (int cpu : ip.cpus)
      if (auto it = f.node.find(cpu); it != f.node.end()) nodes.insert(it->second);
    ip.nodes.assign(nodes.begin(), nodes.end());
    out.push_back(std::move(ip));
  }
  return out;
}

void map_onto_host(std::vector<InstancePlan>& instances, const std::vector<int>& allowed,
                   const std::string& source) {
  const size_t n = instances.size();
  if (n == 0) return;
  if (allowed.size() < n)
    throw ConfigError(fmt::format(
        "{}: [engine] map_cpus: {} instance(s) need at least one CPU each, and this process may "
        "run on {} ({}): run fewer instances here",
        source, n, allowed.size(), common::format_cpulist(allowed)));
  size_t pos = 0;
  for (size_t k = 0; k < n; ++k) {
    size_t take = allowed.size() / n + (k < allowed.size() % n ? 1 : 0);
    instances[k].host_cpus.assign(allowed.begin() + static_cast<long>(pos),
                                  allowed.begin() + static_cast<long>(pos + take));
    pos += take;
  }
}

std::string launch_config_text(const InstancePlan& i) {
  return fmt::format(
      "# Written by epyctuned for instance {}: its share of the profile's launch plan.\n"
      "# Rewritten at every (re)start; edit /etc/epyctune/epyctune.toml instead.\n\n{}",
      i.cfg.name, launch::to_toml(i.plan));
}

}  // namespace epyctune::daemon
