#include "stack/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/cpulist.hpp"
#include "launch/from_profile.hpp"
#include "stack/steps.hpp"

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

std::string one_line(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
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

std::string plan_to_text(const Session& s, const std::vector<KnobPlan>& plans) {
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
  out += fmt::format("  {:>3} {:>5} {:>6} {:>4}  {:<12} {:<14} {:<14} {}\n", "L3", "id", "socket",
                     "node", "role", "draft", "verify", "housekeeping");
  for (const auto& r : domain_rows(s))
    out += fmt::format("  {:>3} {:>5} {:>6} {:>4}  {:<12} {:<14} {:<14} {}\n", r.d->index,
                       r.d->cache_id, r.d->socket, r.d->numa_node, r.role, format_cpulist(r.draft),
                       format_cpulist(r.verify), format_cpulist(r.hk));
  if (s.partition_error.empty())
    out += "\nLaunch plan (steps 7-8 write it; the engine runs on it):\n" +
           launch::to_text(launch::plan_from_profile(s.profile, s.part));
  std::string step;
  std::map<std::string, int> summary;
  for (const auto& p : plans) {
    if (p.knob.step != step) {
      step = p.knob.step;
      int number = 0;
      std::string title = step_title(step, &number);
      out += fmt::format("\nStep {} {}: {}\n", number, step, title);
    }
    std::string status = to_string(p.status);
    summary[status]++;
    std::string line =
        fmt::format("  {:<15} {:<28} {} -> {}", status, one_line(p.knob.name, 28),
                    one_line(p.current.display(), 30), one_line(p.desired_display(), 40));
    if (p.status == PlanStatus::Unchanged)
      line = fmt::format("  {:<15} {:<28} {}", status, one_line(p.knob.name, 28),
                         one_line(p.current.display(), 40));
    if (!p.reason.empty()) line += "  (" + one_line(p.reason, 200) + ")";
    out += line + "\n";
  }
  out += "\nSummary:";
  for (const auto& [k, n] : summary) out += fmt::format(" {} {},", n, k);
  if (out.back() == ',') out.pop_back();
  out += "\n";
  return out;
}

}  // namespace epyctune::stack
