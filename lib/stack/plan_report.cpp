#include "stack/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/cpulist.hpp"
#include "common/text_table.hpp"
#include "launch/from_profile.hpp"
#include "stack/steps.hpp"
#include "stack/text_report.hpp"

namespace epyctune::stack {

using nlohmann::json;

namespace {

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int x : a)
    if (std::count(b.begin(), b.end(), x)) out.push_back(x);
  return out;
}

struct DomainRow {
  const host::L3Domain* d;
  std::string role;
  std::vector<int> draft, verify, hk;
};

std::vector<DomainRow> domain_rows(const Session& s) {
  std::vector<DomainRow> rows;
  for (const auto& d : s.topo.l3_domains) {
    DomainRow r{&d, "", intersect(d.cpus, s.part.draft.cpus), intersect(d.cpus, s.part.verify.cpus),
                intersect(d.cpus, s.part.housekeeping_cpus)};
    bool draft = std::count(s.part.draft.l3.begin(), s.part.draft.l3.end(), d.index);
    bool verify = std::count(s.part.verify.l3.begin(), s.part.verify.l3.end(), d.index);
    r.role = draft ? "draft" : verify ? "verify" : "housekeeping";
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string step_title(const std::string& name, int* number) {
  for (const auto& st : all_steps())
    if (st.name == name) {
      *number = st.number;
      return st.title;
    }
  *number = 0;
  return name;
}

}  // namespace

json plan_to_json(const Session& s, const std::vector<KnobPlan>& plans) {
  using common::format_cpulist;
  json domains = json::array();
  for (const auto& r : domain_rows(s))
    domains.push_back({{"index", r.d->index},
                       {"cache_id", r.d->cache_id},
                       {"socket", r.d->socket},
                       {"node", r.d->numa_node},
                       {"role", r.role},
                       {"cpus", format_cpulist(r.d->cpus)},
                       {"draft_cpus", format_cpulist(r.draft)},
                       {"verify_cpus", format_cpulist(r.verify)},
                       {"housekeeping_cpus", format_cpulist(r.hk)}});
  json partition{{"draft_cpus", format_cpulist(s.part.draft.cpus)},
                 {"verify_cpus", format_cpulist(s.part.verify.cpus)},
                 {"housekeeping_cpus", format_cpulist(s.part.housekeeping_cpus)},
                 {"idle_sibling_cpus", format_cpulist(s.part.idle_sibling_cpus)},
                 {"draft_nodes", s.part.draft.nodes},
                 {"verify_nodes", s.part.verify.nodes},
                 {"domains", domains}};
  json steps = json::array();
  std::map<std::string, int> summary;
  for (const auto& p : plans) {
    if (steps.empty() || steps.back()["name"] != p.knob.step) {
      int number = 0;
      std::string title = step_title(p.knob.step, &number);
      steps.push_back(
          {{"number", number}, {"name", p.knob.step}, {"title", title}, {"knobs", json::array()}});
    }
    std::string status = to_string(p.status);
    summary[status]++;
    steps.back()["knobs"].push_back({{"knob", p.knob.name},
                                     {"kind", to_string(p.knob.loc.kind)},
                                     {"path", p.knob.loc.path},
                                     {"current", p.current.display()},
                                     {"desired", p.desired_display()},
                                     {"status", status},
                                     {"reason", p.reason}});
  }
  const auto& t = s.topo;
  json host{{"source", t.source},
            {"brand", t.cpu.brand},
            {"vendor", t.cpu.vendor},
            {"family", t.cpu.family},
            {"model", t.cpu.model},
            {"sockets", t.sockets},
            {"numa_nodes", t.numa_nodes.size()},
            {"l3_domains", t.l3_domains.size()},
            {"cores", t.n_cores()},
            {"cpus", t.n_cpus()}};
  partition["error"] = s.partition_error;
  json j{{"schema_version", 1},        {"profile", s.profile.name}, {"host", host},
         {"mismatches", s.mismatches}, {"partition", partition},    {"steps", steps},
         {"summary", summary}};
  j["launch"] = s.partition_error.empty()
                    ? launch::to_json(launch::plan_from_profile(s.profile, s.part))
                    : json(nullptr);
  return j;
}

namespace {

common::Tone tone_of(PlanStatus st) {
  using common::Tone;
  switch (st) {
    case PlanStatus::Unchanged:
      return Tone::good;
    case PlanStatus::Change:
      return Tone::change;
    case PlanStatus::Unsupported:
    case PlanStatus::Manual:
      return Tone::bad;
    case PlanStatus::Pending:
      return Tone::warn;
    case PlanStatus::Info:
      return Tone::dim;
  }
  return Tone::plain;
}

std::string values_of(const KnobPlan& p) {
  if (p.status == PlanStatus::Unchanged) return one_line(p.current.display(), 40);
  return one_line(p.current.display(), 30) + " -> " + one_line(p.desired_display(), 40);
}

std::string header_text(const Session& s) {
  using common::format_cpulist;
  std::string out = fmt::format("Profile {} on {} ({}, {} sockets, {} cores, {} CPUs)\n",
                                s.profile.name, s.topo.cpu.brand.empty() ? "?" : s.topo.cpu.brand,
                                s.topo.source, s.topo.sockets, s.topo.n_cores(), s.topo.n_cpus());
  for (const auto& m : s.mismatches) out += "  forced past mismatch: " + m + "\n";
  if (!s.partition_error.empty())
    out += "  partition does not fit this host: " + s.partition_error + "\n";
  out += fmt::format(
      "\nPartition: draft CPUs {} (nodes {}), verify CPUs {} (nodes {}), "
      "housekeeping CPUs {}\n",
      format_cpulist(s.part.draft.cpus), fmt::join(s.part.draft.nodes, ","),
      format_cpulist(s.part.verify.cpus), fmt::join(s.part.verify.nodes, ","),
      format_cpulist(s.part.housekeeping_cpus));
  if (!s.part.idle_sibling_cpus.empty())
    out += fmt::format("  idle SMT siblings: {}\n", format_cpulist(s.part.idle_sibling_cpus));
  common::TextTable domains("  ");
  domains.row({"L3", "id", "socket", "node", "role", "draft", "verify", "housekeeping"});
  for (const auto& r : domain_rows(s))
    domains.row({std::to_string(r.d->index), std::to_string(r.d->cache_id),
                 std::to_string(r.d->socket), std::to_string(r.d->numa_node), r.role,
                 format_cpulist(r.draft), format_cpulist(r.verify), format_cpulist(r.hk)});
  out += domains.render(false);
  if (s.partition_error.empty())
    out += "\nLaunch plan (steps 7-8 write it; the engine runs on it):\n" +
           launch::to_text(launch::plan_from_profile(s.profile, s.part));
  return out;
}

// What the operator does after this plan: apply, and for boot parameters
// update-grub and a reboot.
std::string next_steps(const Session& s, const std::vector<KnobPlan>& plans) {
  bool change = false, grub = false, reboot = false, pending = false;
  for (const auto& p : plans) {
    if (p.status == PlanStatus::Pending) pending = true;
    if (p.status != PlanStatus::Change) continue;
    change = true;
    grub |= is_grub_dropin(p.knob.loc.path);
    reboot |= p.knob.reboot_required;
  }
  if (change) {
    std::string then = grub     ? ", then run update-grub and reboot (boot parameters)"
                       : reboot ? ", then reboot (boot-time settings)"
                                : "";
    return fmt::format("Next: epyctune apply --profile {}{}\n", s.profile.name, then);
  }
  return boot_next_step(false, pending,
                        "boot parameters wait for it; run update-grub first if it has not run "
                        "since the drop-in was written");
}

}  // namespace

std::string plan_to_text(const Session& s, const std::vector<KnobPlan>& plans,
                         const TextOptions& o) {
  std::string out = header_text(s);
  common::TextTable table("  ");
  std::map<std::string, int> summary;
  for (const auto& p : plans) summary[to_string(p.status)]++;
  for (size_t begin = 0; begin < plans.size();) {
    size_t end = begin;
    while (end < plans.size() && plans[end].knob.step == plans[begin].knob.step) ++end;
    std::vector<FoldInput> in;
    std::vector<size_t> index;
    for (size_t i = begin; i < end; ++i) {
      const auto& p = plans[i];
      if (o.changed_only && p.status != PlanStatus::Change) continue;
      in.push_back({p.knob.name, to_string(p.status) + '\n' + values_of(p) + '\n' + p.reason});
      index.push_back(i);
    }
    int number = 0;
    std::string title = step_title(plans[begin].knob.step, &number);
    if (!in.empty()) {
      table.line("");
      table.line(fmt::format("Step {} {}: {}", number, plans[begin].knob.step, title),
                 common::Tone::heading);
    }
    for (const auto& row : fold_rows(in, !o.per_cpu)) {
      const auto& p = plans[index[row.members.front()]];
      table.row({{to_string(p.status), tone_of(p.status)},
                 one_line(row.name, 44),
                 values_of(p),
                 p.reason.empty() ? "" : "(" + one_line(p.reason, 200) + ")"});
    }
    begin = end;
  }
  out += table.render(o.colour);
  out += "\nSummary:";
  for (const auto& [k, n] : summary) out += fmt::format(" {} {},", n, k);
  if (out.back() == ',') out.pop_back();
  out += "\n" + next_steps(s, plans);
  return out;
}

}  // namespace epyctune::stack
