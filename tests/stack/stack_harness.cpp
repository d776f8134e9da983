#include "stack_harness.hpp"

#include <algorithm>
#include <set>

namespace epyctune::testing {

// Until lib/profile lands: the defaults of profile.hpp plus a partition in
// the spirit of the shipped profiles (draft on L3 domain 0, one housekeeping core).
profile::Profile stack_test_profile(const std::string& machine) {
  profile::Profile p;
  p.name = "epyc-" + machine;
  p.partition.draft_l3 = {0};
  p.partition.housekeeping_cores = {0};
  p.numa.model_gb = 4;
  p.cat.draft_cbm = "fff0";
  p.cat.default_cbm = "000f";
  return p;
}

profile::ResolvedPartition stack_test_partition(const profile::Profile& p,
                                                const host::Topology& t) {
  profile::ResolvedPartition r;
  std::set<int> hk(p.partition.housekeeping_cores.begin(), p.partition.housekeeping_cores.end());
  for (const auto& d : t.l3_domains) {
    bool draft = std::count(p.partition.draft_l3.begin(), p.partition.draft_l3.end(), d.index);
    (draft ? r.draft_l3 : r.verify_l3).push_back(d.index);
    for (int core : d.cores) {
      const auto& c = t.cores[static_cast<size_t>(core)];
      if (hk.count(core)) {
        r.housekeeping_cpus.insert(r.housekeeping_cpus.end(), c.cpus.begin(), c.cpus.end());
        continue;
      }
      (draft ? r.draft_cpus : r.verify_cpus).push_back(c.cpus.front());
      auto& nodes = draft ? r.draft_nodes : r.verify_nodes;
      if (!std::count(nodes.begin(), nodes.end(), c.numa_node)) nodes.push_back(c.numa_node);
    }
  }
  for (auto* v : {&r.draft_cpus, &r.verify_cpus, &r.housekeeping_cpus, &r.draft_nodes,
                  &r.verify_nodes})
    std::sort(v->begin(), v->end());
  return r;
}

}  // namespace epyctune::testing
