#include "host/json.hpp"

#include <set>

#include "common/cpulist.hpp"

namespace epyctune::host {

using nlohmann::json;

json cpu_to_json(const CpuIdentity& c) {
  return json{{"vendor", c.vendor},
              {"family", c.family},
              {"model", c.model},
              {"stepping", c.stepping},
              {"brand", c.brand},
              {"os_model_name", c.os_model_name},
              {"codename", c.codename},
              {"microarch", c.microarch},
              {"prefetch_control", c.prefetch_control},
              {"hypervisor", c.hypervisor},
              {"identity_source", c.source},
              {"flags", c.flags}};
}

json topology_to_json(const Topology& t) {
  json nodes = json::array(), l3 = json::array(), sockets = json::array();
  for (const auto& n : t.numa_nodes)
    nodes.push_back({{"node", n.os_index},
                     {"socket", n.socket},
                     {"sockets", n.sockets},
                     {"memory_bytes", n.memory_bytes},
                     {"cpus", common::format_cpulist(n.cpus)}});
  for (const auto& d : t.l3_domains)
    l3.push_back({{"index", d.index},
                  {"cache_id", d.cache_id},
                  {"socket", d.socket},
                  {"numa_node", d.numa_node},
                  {"size_bytes", d.size_bytes},
                  {"cores", common::format_cpulist(d.cores)},
                  {"cpus", common::format_cpulist(d.cpus)},
                  {"synthetic", d.synthetic}});
  for (int s = 0; s < t.sockets; ++s) {
    std::set<int> sn, sl;
    for (const auto& n : t.numa_nodes)
      if (n.on_socket(s)) sn.insert(n.os_index);
    for (const auto& d : t.l3_domains)
      if (d.socket == s) sl.insert(d.index);
    sockets.push_back({{"socket", s},
                       {"cpus", common::format_cpulist(t.cpus_of_socket(s))},
                       {"numa_nodes", std::vector<int>(sn.begin(), sn.end())},
                       {"l3_domains", std::vector<int>(sl.begin(), sl.end())}});
  }
  return json{{"source", t.source},
              {"sockets", t.sockets},
              {"cores", t.n_cores()},
              {"cpus", t.n_cpus()},
              {"threads_per_core", t.threads_per_core},
              {"nodes_per_socket", t.nodes_per_socket()},
              {"online_cpus", common::format_cpulist(t.online_cpus)},
              {"socket_list", sockets},
              {"numa_nodes", nodes},
              {"l3_domains", l3}};
}

namespace {
json cap(const Capability& c) {
  return json{{"supported", c.supported}, {"reason", c.reason}, {"detail", c.detail}};
}
}  // namespace

json capabilities_to_json(const Capabilities& c) {
  return json{{"smt_control", cap(c.smt_control)},
              {"cpufreq", cap(c.cpufreq)},
              {"resctrl", cap(c.resctrl)},
              {"msr", cap(c.msr)},
              {"prefetch_control", cap(c.prefetch_control)},
              {"hugepages_2m", cap(c.hugepages_2m)},
              {"hugepages_1g", cap(c.hugepages_1g)},
              {"numa_balancing", cap(c.numa_balancing)},
              {"thp", cap(c.thp)},
              {"irq_affinity", cap(c.irq_affinity)},
              {"cpufreq_driver", c.cpufreq_driver},
              {"governors", c.governors},
              {"governor", c.governor},
              {"amd_pstate_mode", c.amd_pstate_mode},
              {"smt_state", c.smt_state},
              {"isolated_cpus", common::format_cpulist(c.isolated_cpus)},
              {"nohz_full_cpus", common::format_cpulist(c.nohz_full_cpus)},
              {"cmdline", c.cmdline},
              {"resctrl_kernel", c.resctrl_kernel},
              {"resctrl_mounted", c.resctrl_mounted},
              {"cbm_mask", c.cbm_mask},
              {"num_closids", c.num_closids},
              {"min_cbm_bits", c.min_cbm_bits},
              {"root", c.root},
              {"cap_sys_rawio", c.cap_sys_rawio},
              {"lockdown", c.lockdown},
              {"numa_balancing_on", c.numa_balancing_on},
              {"thp_mode", c.thp_mode},
              {"irqs", c.irqs},
              {"managed_irqs", c.managed_irqs}};
}

Capabilities capabilities_unknown(const std::string& reason) {
  Capabilities c;
  for (Capability* x :
       {&c.smt_control, &c.cpufreq, &c.resctrl, &c.msr, &c.prefetch_control, &c.hugepages_2m,
        &c.hugepages_1g, &c.numa_balancing, &c.thp, &c.irq_affinity})
    x->reason = reason;
  return c;
}

}  // namespace epyctune::host
