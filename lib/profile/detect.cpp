#include "profile/detect.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/cpulist.hpp"
#include "host/cpu_identity.hpp"
#include "host/json.hpp"
#include "profile/generate.hpp"

namespace epyctune::profile {

using common::format_cpulist;
using nlohmann::json;

DetectReport run_detect(const host::Sysroot& root, const host::DiscoverOptions& opt) {
  DetectReport r;
  r.topology = host::discover(root, opt);
  if (opt.topology_xml.empty()) {
    r.capabilities = host::probe_capabilities(root, r.topology);
  } else {
    r.capabilities_probed = false;
    r.capabilities = host::capabilities_unknown(
        "not probed: the topology comes from an XML file, there is no host to ask");
  }
  for (const auto& name : list_profiles()) {
    Profile p = load_profile(name, &root);
    r.fits.push_back({p.name, p.aliases, match_profile(p, r.topology)});
  }
  std::stable_sort(r.fits.begin(), r.fits.end(), [](const ProfileFit& a, const ProfileFit& b) {
    if (a.match.matches != b.match.matches) return a.match.matches;
    return a.match.score > b.match.score;
  });
  const auto& t = r.topology;
  if (!r.fits.empty() && r.fits.front().match.matches) {
    const auto& f = r.fits.front();
    r.recommended = f.name;
    r.note = fmt::format("this host is what {} describes: epyctune plan --profile {}", f.name,
                         f.aliases.empty() ? f.name : f.aliases.front());
  } else {
    std::string why;
    if (t.cpu.vendor != "AuthenticAMD")
      why = fmt::format("the CPU vendor is {}, not AMD",
                        t.cpu.vendor.empty() ? "unknown" : t.cpu.vendor);
    else if (t.cpu.family != 25 && t.cpu.family != 26 && t.cpu.family != 0)
      why = fmt::format(
          "CPU family {} ({}) has no built-in profile (they cover families 25 and 26: Zen 3 to "
          "Zen 5)",
          t.cpu.family, t.cpu.microarch);
    else
      why = fmt::format(
          "its shape ({} socket(s), {} cores, {} L3 domains) is none of the profiled machines",
          t.sockets, t.n_cores(), t.l3_domains.size());
    if (t.cpu.hypervisor) why += "; it is a virtual machine";
    std::string closest;
    if (!r.fits.empty())
      closest = fmt::format(
          "; closest: {} (score {}: {})", r.fits.front().name, r.fits.front().match.score,
          r.fits.front().match.mismatches.empty() ? std::string("-")
                                                  : r.fits.front().match.mismatches.front());
    // Generation refuses hosts it cannot partition (no AMD, no L3, a single
    // L3 domain): then detect must not offer it.
    std::string cannot;
    try {
      generate_profile(t, {}, {});
    } catch (const GenerateError& e) {
      cannot = e.what();
    }
    std::string sysroot = root.is_live() ? "/" : root.root().string();
    if (cannot.empty()) {
      r.generate_command = generate_command(t, sysroot, opt.topology_xml);
      r.note = fmt::format(
          "no built-in profile fits this host: {}{}. Generate one from its topology: {} ; then: {}",
          why, closest, r.generate_command, generated_plan_command(t, sysroot, opt.topology_xml));
    } else {
      r.note = fmt::format(
          "no built-in profile fits this host: {}{}. `epyctune profile generate` cannot write one "
          "either: {}. Write a profile by hand (include = \"base\" and set [hardware] and "
          "[partition]) or plan with --force to rehearse",
          why, closest, cannot);
    }
  }
  return r;
}

json detect_to_json(const DetectReport& r) {
  json fits = json::array();
  for (const auto& f : r.fits)
    fits.push_back({{"name", f.name},
                    {"aliases", f.aliases},
                    {"matches", f.match.matches},
                    {"score", f.match.score},
                    {"reasons", f.match.reasons},
                    {"mismatches", f.match.mismatches}});
  return json{
      {"schema_version", kDetectSchemaVersion},
      {"source", r.topology.source},
      {"cpu", host::cpu_to_json(r.topology.cpu)},
      {"topology", host::topology_to_json(r.topology)},
      {"capabilities_probed", r.capabilities_probed},
      {"capabilities", host::capabilities_to_json(r.capabilities)},
      {"profiles", fits},
      {"recommendation",
       {{"profile", r.recommended.empty() ? json(nullptr) : json(r.recommended)},
        {"generate_command", r.generate_command.empty() ? json(nullptr) : json(r.generate_command)},
        {"note", r.note}}}};
}

namespace {

std::string gib(uint64_t b) {
  return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
}
std::string mib(uint64_t b) {
  return fmt::format("{} MiB", b >> 20);
}

std::string l3_line(const host::L3Domain& d, const char* indent) {
  return fmt::format("{}L3 #{} (cache id {}) {}: cores {}, CPUs {}\n", indent, d.index, d.cache_id,
                     d.synthetic ? "no L3 reported" : mib(d.size_bytes), format_cpulist(d.cores),
                     format_cpulist(d.cpus));
}

void capability_line(std::string& s, const char* name, const host::Capability& c) {
  s += fmt::format("  {:<17}{:<5}{}\n", name, c.supported ? "yes" : "no",
                   c.supported ? c.detail : c.reason);
}

}  // namespace

std::string detect_to_text(const DetectReport& r) {
  const auto& t = r.topology;
  const auto& cpu = t.cpu;
  std::string s = fmt::format("Host: {}\n", t.source);
  s += fmt::format("CPU:  {}{}\n", cpu.brand.empty() ? "(no brand string)" : cpu.brand,
                   !cpu.os_model_name.empty() && cpu.os_model_name != cpu.brand
                       ? fmt::format(" (kernel: \"{}\")", cpu.os_model_name)
                       : "");
  s += fmt::format(
      "      {} family {} ({:X}h) model {} ({:X}h) stepping {}: {}{}{}; identity from {}\n",
      cpu.vendor.empty() ? "unknown vendor" : cpu.vendor, cpu.family, cpu.family, cpu.model,
      cpu.model, cpu.stepping, cpu.microarch,
      cpu.codename.empty() ? ""
      : cpu.source == "cpuid" &&
              cpu.codename != host::codename_for(cpu.vendor, cpu.family, cpu.model)
          ? fmt::format(", libcpuid guesses \"{}\" (a hint only)", cpu.codename)
          : ", " + cpu.codename,
      cpu.hypervisor ? ", virtual machine" : "", cpu.source);
  int nps = t.nodes_per_socket();
  s += fmt::format(
      "Topology: {} socket(s), {} NUMA node(s) ({}), {} L3 domain(s), {} cores, {} CPUs "
      "(SMT{})\n",
      t.sockets, t.numa_nodes.size(),
      nps == 0 ? "NPS0: a node spans sockets" : fmt::format("NPS{}", nps), t.l3_domains.size(),
      t.n_cores(), t.n_cpus(), t.threads_per_core);
  std::vector<int> shown;  // L3 domains listed under a node
  for (int sk = 0; sk < t.sockets; ++sk) {
    s += fmt::format("  socket {}: CPUs {}\n", sk, format_cpulist(t.cpus_of_socket(sk)));
    // A node over several sockets is listed under each, with that socket's
    // L3 domains only.
    for (const auto& n : t.numa_nodes) {
      if (!n.on_socket(sk)) continue;
      s += fmt::format(
          "    node {}: {}, CPUs {}{}\n", n.os_index, gib(n.memory_bytes), format_cpulist(n.cpus),
          n.sockets.size() > 1 ? fmt::format(" (spans sockets {})", format_cpulist(n.sockets))
                               : "");
      for (const auto& d : t.l3_domains)
        if (d.socket == sk && d.numa_node == n.os_index) {
          s += l3_line(d, "      ");
          shown.push_back(d.index);
        }
    }
    for (const auto& d : t.l3_domains)
      if (d.socket == sk && std::find(shown.begin(), shown.end(), d.index) == shown.end())
        s += l3_line(d, "    ");
  }
  for (const auto& n : t.numa_nodes)
    if (n.socket < 0) s += fmt::format("  node {}: {}, no CPUs\n", n.os_index, gib(n.memory_bytes));
  const auto& c = r.capabilities;
  s += "Capabilities:\n";
  capability_line(s, "smt_control", c.smt_control);
  capability_line(s, "cpufreq", c.cpufreq);
  capability_line(s, "resctrl", c.resctrl);
  capability_line(s, "msr", c.msr);
  capability_line(s, "prefetch_control", c.prefetch_control);
  capability_line(s, "hugepages_2m", c.hugepages_2m);
  capability_line(s, "hugepages_1g", c.hugepages_1g);
  capability_line(s, "numa_balancing", c.numa_balancing);
  capability_line(s, "thp", c.thp);
  capability_line(s, "irq_affinity", c.irq_affinity);
  if (r.capabilities_probed) {
    s += fmt::format("  isolated CPUs: {}; nohz_full: {}\n",
                     c.isolated_cpus.empty() ? "none" : format_cpulist(c.isolated_cpus),
                     c.nohz_full_cpus.empty() ? "none" : format_cpulist(c.nohz_full_cpus));
    s += fmt::format("  kernel command line: {}\n", c.cmdline);
  }
  s += "Profiles:\n";
  for (const auto& f : r.fits) {
    s += fmt::format("  {:<14}{} (score {})\n", f.name, f.match.matches ? "fits" : "does not fit",
                     f.match.score);
    for (const auto& m : f.match.mismatches) s += fmt::format("      x {}\n", m);
    if (f.match.matches)
      for (const auto& m : f.match.reasons) s += fmt::format("      + {}\n", m);
  }
  s += fmt::format("Recommendation: {}\n", r.note);
  return s;
}

}  // namespace epyctune::profile
