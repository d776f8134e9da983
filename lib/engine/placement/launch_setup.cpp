#include "engine/placement/launch_setup.hpp"

#include <fmt/format.h>
#include <numaif.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/cpulist.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/runtime/numa_maps.hpp"
#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine::placement {

namespace {

bool all_in(const std::vector<int>& v, const std::vector<int>& set) {
  return std::all_of(v.begin(), v.end(),
                     [&](int x) { return std::find(set.begin(), set.end(), x) != set.end(); });
}

nlohmann::json nodes_json(const std::map<int, uint64_t>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (auto [n, b] : m) j[std::to_string(n)] = b;
  return j;
}

}  // namespace

LaunchSetup::LaunchSetup(LaunchOptions o) : o_(std::move(o)) {
  planned_ = launch::read_launch_config(o_.launch_config);
  placed_ = planned_.has_spec ? launch::place_on(planned_, runtime::allowed_cpus(), o_.map_cpus)
                              : planned_;
  auto& target_nodes = placed_.weights.target_nodes;
  auto& draft_nodes = placed_.weights.draft_nodes;
  if (!planned_.has_weights) {
    target_nodes = planned_.verify.nodes;
    draft_nodes = planned_.draft.nodes;
  }
  const auto here = runtime::memory_nodes();
  std::vector<int> missing;
  for (const auto* v : {&target_nodes, &draft_nodes})
    for (int n : *v)
      if (std::find(here.begin(), here.end(), n) == here.end()) missing.push_back(n);
  if (!missing.empty()) {
    if (!o_.map_cpus)
      throw launch::LaunchConfigError(fmt::format(
          "{}: NUMA nodes {} of the plan have no memory here (nodes {}): run on the host it was "
          "planned for, or let the engine map the plan onto this host (map_cpus)",
          o_.launch_config, common::format_cpulist(missing), common::format_cpulist(here)));
    // Each side onto the nodes of the CPUs it got here.
    auto remap = [&](std::vector<int>& v, const std::vector<int>& cpus) {
      if (all_in(v, here)) return;
      v = cpus.empty() ? here : runtime::nodes_of_cpus(cpus);
    };
    remap(target_nodes, placed_.verify.cpus);
    remap(draft_nodes, placed_.draft.cpus);
    node_note_ = fmt::format(
        "planned NUMA nodes {} are not all here; mapped onto target nodes {}, draft nodes {}",
        common::format_cpulist(missing), common::format_cpulist(target_nodes),
        common::format_cpulist(draft_nodes));
  }
}

const std::vector<int>& LaunchSetup::side_nodes(launch::Role side) const {
  return side == launch::Role::draft ? placed_.weights.draft_nodes : placed_.weights.target_nodes;
}

std::string LaunchSetup::group_of(launch::Role side) const {
  return planned_.has_spec ? planned_.side(side).group : "";
}

nlohmann::json weights_json(const LlamaModel& m) {
  const auto& lr = m.load_report();
  const auto& s = lr.shared;
  nlohmann::json j = {{"store", s.shared ? "shared" : "private"},
                      {"pages", runtime::page_kind_name(lr.pages)},
                      {"note", lr.page_note}};
  if (s.shared) {
    j["file"] = s.file;
    j["inode"] = s.inode;
    j["built"] = s.built;
    j["fs"] = s.fs;
    j["page_size"] = s.page_size;
    j["lock_wait_s"] = s.lock_wait_s;
  }
  return j;
}

void LaunchSetup::apply_memory_policy(ModelOptions& mo, launch::Role side) const {
  const bool draft = side == launch::Role::draft;
  if (!o_.shared_weights.empty()) mo.shared_weights = o_.shared_weights;
  if (!planned_.has_weights && !planned_.has_spec) return;
  mo.copy_weights = true;
  mo.numa_nodes = side_nodes(side);
  if (draft || !planned_.has_weights) {
    mo.numa = runtime::NumaPolicy::interleave;  // over the draft's own nodes
  } else {
    mo.numa = runtime::parse_numa_policy(planned_.weights.layout);
    mo.hugepages = planned_.weights.hugepages;
  }
  if (draft && planned_.has_weights) mo.hugepages = planned_.weights.hugepages;
}

std::unique_ptr<runtime::ThreadPool> LaunchSetup::make_pool(launch::Role side) {
  if (!planned_.has_spec)
    throw launch::LaunchConfigError(o_.launch_config +
                                    ": no [spec] section, so no CPUs to pin to (apply step 8)");
  return std::make_unique<runtime::ThreadPool>(placed_.side(side).cpus, true, worker_hook(side));
}

std::unique_ptr<runtime::ThreadPool> LaunchSetup::make_every_pool() {
  const auto& v = placed_.verify.cpus;
  const auto& d = placed_.draft.cpus;
  std::vector<int> cpus = v;
  cpus.insert(cpus.end(), d.begin(), d.end());
  auto on_verify = worker_hook(launch::Role::verify), on_draft = worker_hook(launch::Role::draft);
  auto hook = [on_verify, on_draft, d](int tid, int cpu) {
    (std::find(d.begin(), d.end(), cpu) != d.end() ? on_draft : on_verify)(tid, cpu);
  };
  return std::make_unique<runtime::ThreadPool>(std::move(cpus), true, hook);
}

runtime::ThreadPool::WorkerStartHook LaunchSetup::worker_hook(launch::Role side) {
  auto log = log_;
  const std::string group = group_of(side);
  const std::string root = o_.resctrl_root;
  return [log, side, group, root](int, int cpu) { log->record(side, cpu, root, group); };
}

void LaunchSetup::record_driver(launch::Role side, runtime::ThreadPool& pool) {
  pool.run([](int) {});  // pins this thread as the pool's worker 0
  log_->record(side, pool.cpus().front(), o_.resctrl_root, group_of(side));
}

void LaunchSetup::bind_kv(const LlamaModel& m, launch::Role side) {
  const auto& nodes = side_nodes(side);
  auto r = m.kv_range();
  if (nodes.empty() || r.end <= r.begin) return;
  unsigned long mask[16] = {};
  for (int n : nodes)
    if (n >= 0 && n < 1024) mask[n / 64] |= 1UL << (n % 64);
  if (::mbind(reinterpret_cast<void*>(r.begin), r.end - r.begin, MPOL_BIND, mask, 1024, 0) != 0)
    memory_errors_.push_back(fmt::format("{} KV cache: mbind to nodes {} failed: {}",
                                         side == launch::Role::draft ? "draft" : "target",
                                         common::format_cpulist(nodes), std::strerror(errno)));
}

std::string LaunchSetup::check(const LlamaModel& target, const LlamaModel* draft) {
  std::string err;
  auto entries = runtime::read_self_numa_maps(err);
  std::vector<std::string> problems = memory_errors_;
  if (!err.empty()) {
    problems.push_back("cannot read back memory placement: " + err);
  } else {
    auto one = [&](const std::string& what, const std::vector<runtime::AddressRange>& ranges,
                   const std::vector<int>& nodes) {
      auto p = runtime::placement_of(entries, ranges);
      memory_[what] = {{"bytes_per_node", nodes_json(p.bytes_per_node)},
                       {"policies", p.policies},
                       {"plan_nodes", nodes}};
      auto e = launch::check_nodes(what, p.bytes_per_node, nodes);
      if (!e.empty()) problems.push_back(e);
    };
    const auto& tn = placed_.weights.target_nodes;
    const auto& dn = placed_.weights.draft_nodes;
    one("target weights", target.weight_ranges(), tn);
    memory_["target weights"]["store"] = weights_json(target);
    one("target KV cache", {target.kv_range()}, tn);
    if (draft) {
      one("draft weights", draft->weight_ranges(), dn);
      memory_["draft weights"]["store"] = weights_json(*draft);
      one("draft KV cache", {draft->kv_range()}, dn);
    }
  }
  std::string out = log_->errors();
  for (const auto& p : problems) out += (out.empty() ? "" : "\n") + p;
  return out;
}

nlohmann::json LaunchSetup::report() const {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : log_->threads())
    threads.push_back({{"side", launch::role_name(t.side)},
                       {"tid", t.tid},
                       {"cpu", t.expected_cpu},
                       {"cpus_allowed", common::format_cpulist(t.allowed)},
                       {"resctrl_group", t.group},
                       {"in_group", t.in_group},
                       {"error", t.error}});
  return {{"launch_config", o_.launch_config},
          {"profile", planned_.profile},
          {"resctrl_root", o_.resctrl_root},
          {"draft_l3", planned_.draft.l3},
          {"planned",
           {{"draft_cpus", common::format_cpulist(planned_.draft.cpus)},
            {"verify_cpus", common::format_cpulist(planned_.verify.cpus)},
            {"draft_group", planned_.draft.group},
            {"verify_group", planned_.verify.group}}},
          {"draft_cpus", common::format_cpulist(placed_.draft.cpus)},
          {"verify_cpus", common::format_cpulist(placed_.verify.cpus)},
          {"cpus_mapped", !placed_.reason.empty()},
          {"cpu_note", placed_.reason},
          {"target_nodes", placed_.weights.target_nodes},
          {"draft_nodes", placed_.weights.draft_nodes},
          {"node_note", node_note_},
          {"threads", threads},
          {"memory", memory_}};
}

std::vector<std::string> LaunchSetup::report_lines() const {
  std::vector<std::string> out;
  out.push_back(fmt::format("launch config {} (profile {})", o_.launch_config,
                            planned_.profile.empty() ? "?" : planned_.profile));
  if (planned_.has_spec)
    out.push_back(fmt::format(
        "draft L3 {} CPUs {} -> {}, verify CPUs {} -> {}",
        common::format_cpulist(planned_.draft.l3), common::format_cpulist(planned_.draft.cpus),
        common::format_cpulist(placed_.draft.cpus), common::format_cpulist(planned_.verify.cpus),
        common::format_cpulist(placed_.verify.cpus)));
  if (!placed_.reason.empty()) out.push_back(placed_.reason);
  if (!node_note_.empty()) out.push_back(node_note_);
  std::map<std::string, int> joined;
  for (const auto& t : log_->threads())
    if (t.in_group) joined[t.group]++;
  for (const auto& [g, n] : joined)
    out.push_back(
        fmt::format("{} thread(s) in resctrl group {} ({}/{}/tasks)", n, g, o_.resctrl_root, g));
  for (const auto& [what, m] : memory_.items()) {
    out.push_back(fmt::format("{}: {} bytes per node, plan nodes {}", what,
                              m["bytes_per_node"].dump(), m["plan_nodes"].dump()));
    if (m.contains("store") && m["store"]["store"] == "shared")
      out.push_back(
          fmt::format("{}: shared read-only from {}", what, m["store"]["file"].get<std::string>()));
  }
  return out;
}

}  // namespace epyctune::engine::placement
