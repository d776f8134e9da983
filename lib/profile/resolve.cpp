#include "profile/resolve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace epyctune::profile {

namespace {

std::vector<int> sorted(std::set<int> s) {
  return {s.begin(), s.end()};
}

std::string hex(int v) {
  return fmt::format("{} ({:X}h)", v, v);
}

}  // namespace

launch::Side side_on(launch::Role role, std::vector<int> cpus, const host::Topology& t) {
  launch::Side s{role};
  std::set<int> l3, nodes;
  for (const auto& c : t.cores)
    if (std::any_of(c.cpus.begin(), c.cpus.end(), [&](int cpu) {
          return std::find(cpus.begin(), cpus.end(), cpu) != cpus.end();
        })) {
      l3.insert(c.l3);
      nodes.insert(c.numa_node);
    }
  s.l3 = sorted(l3);
  s.nodes = sorted(nodes);
  s.cpus = std::move(cpus);
  return s;
}

int64_t auto_hugepages_2m_per_node(const NumaStep& n, int nodes) {
  if (n.model_gb <= 0 || nodes <= 0) return 0;
  double bytes = n.model_gb * static_cast<double>(uint64_t{1} << 30) * n.hugepage_headroom;
  return static_cast<int64_t>(std::ceil(bytes / nodes / static_cast<double>(uint64_t{2} << 20)));
}

std::vector<int> HostPartition::inference_cpus() const {
  std::vector<int> cpus = draft.cpus;
  cpus.insert(cpus.end(), verify.cpus.begin(), verify.cpus.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

HostPartition resolve_partition(const Profile& p, const host::Topology& t) {
  validate_profile(p, &t);  // domains, cores and CPUs exist
  std::set<int> draft(p.partition.draft_l3.begin(), p.partition.draft_l3.end()), verify;
  if (p.partition.verify_l3.empty()) {
    for (const auto& d : t.l3_domains)
      if (!draft.count(d.index)) verify.insert(d.index);
  } else {
    verify.insert(p.partition.verify_l3.begin(), p.partition.verify_l3.end());
  }

  std::set<int> hk(p.partition.housekeeping_cores.begin(), p.partition.housekeeping_cores.end());
  for (int cpu : p.partition.housekeeping_cpus)
    for (const auto& c : t.cores)
      if (std::find(c.cpus.begin(), c.cpus.end(), cpu) != c.cpus.end()) hk.insert(c.id);

  std::set<int> dc, vc, hc, idle;
  for (const auto& c : t.cores) {
    bool is_draft = draft.count(c.l3) && !hk.count(c.id);
    bool is_verify = verify.count(c.l3) && !hk.count(c.id);
    if (!is_draft && !is_verify) {
      hk.insert(c.id);
      hc.insert(c.cpus.begin(), c.cpus.end());
      continue;
    }
    auto& set = is_draft ? dc : vc;
    for (size_t i = 0; i < c.cpus.size(); ++i)
      (i == 0 || p.partition.use_smt_siblings ? set : idle).insert(c.cpus[i]);
  }
  // The sides' L3 domains and nodes are those of the cores they got: a listed
  // domain whose cores all went to housekeeping is not one the side runs on.
  HostPartition r;
  r.draft = side_on(launch::Role::draft, sorted(dc), t);
  r.verify = side_on(launch::Role::verify, sorted(vc), t);
  auto threads = [](int wanted, const launch::Side& s) {
    const int n = static_cast<int>(s.cpus.size());
    return wanted > 0 ? std::min(wanted, n) : n;
  };
  r.draft.threads = threads(p.spec.draft_threads, r.draft);
  r.verify.threads = threads(p.spec.verify_threads, r.verify);
  if (p.cat.enabled) {
    r.draft.group = p.cat.draft_group;
    r.verify.group = p.cat.verify_group;
  }
  r.housekeeping_cpus = sorted(hc);
  r.idle_sibling_cpus = sorted(idle);
  r.housekeeping_cores = sorted(hk);
  auto origin_of = [&](const char* key) {
    auto it = p.origins.find(key);
    return it != p.origins.end() ? it->second : Origin{p.source_file, 0, 0};
  };
  if (r.draft.cpus.empty()) {
    auto o = origin_of("partition.draft_l3");
    throw ProfileError(o.file, o.line, o.column, "the draft partition has no CPU left on this host",
                       "give the draft more L3 domains or fewer housekeeping cores");
  }
  if (r.verify.cpus.empty()) {
    auto o = origin_of("partition.verify_l3");
    throw ProfileError(
        o.file, o.line, o.column, "the verify partition has no CPU on this host",
        "leave verify_l3 empty (= every other domain) or list domains this host has");
  }
  return r;
}

MatchResult match_profile(const Profile& p, const host::Topology& t) {
  MatchResult m;
  const Hardware& h = p.hardware;
  const auto& cpu = t.cpu;
  int got = 0, total = 0;
  auto check = [&](int weight, bool ok, const std::string& what) {
    total += weight;
    if (ok) {
      got += weight;
      m.reasons.push_back(what);
    } else {
      m.mismatches.push_back(what);
    }
  };
  check(15, cpu.vendor == h.vendor,
        fmt::format("vendor: profile {}, host {}", h.vendor,
                    cpu.vendor.empty() ? "unknown" : cpu.vendor));
  if (cpu.family == 0) {
    total += 25;
    m.reasons.push_back(
        "family/model: unknown on this host (the topology XML carries no CPUID "
        "numbers and the brand names no known part)");
  } else {
    check(15, cpu.family == h.family,
          fmt::format("family: profile {}, host {}", hex(h.family), hex(cpu.family)));
    if (!h.models.empty())
      check(10, std::find(h.models.begin(), h.models.end(), cpu.model) != h.models.end(),
            fmt::format("model: profile {}, host {}",
                        h.models.size() == 1
                            ? hex(h.models[0])
                            : fmt::format("{:X}h-{:X}h", h.models.front(), h.models.back()),
                        hex(cpu.model)));
  }
  check(10, t.sockets == h.sockets,
        fmt::format("sockets: profile {}, host {}", h.sockets, t.sockets));
  int cps = t.sockets ? t.n_cores() / t.sockets : t.n_cores();
  if (h.cores_per_socket)
    check(15, cps == h.cores_per_socket,
          fmt::format("cores per socket: profile {}, host {}", h.cores_per_socket, cps));
  bool synthetic = std::any_of(t.l3_domains.begin(), t.l3_domains.end(),
                               [](const host::L3Domain& d) { return d.synthetic; });
  int l3ps = t.sockets ? static_cast<int>(t.l3_domains.size()) / t.sockets : 0;
  if (h.l3_domains_per_socket) {
    if (synthetic) {
      total += 20;
      m.mismatches.push_back(fmt::format(
          "L3 domains per socket: profile {}, host reports no L3 cache", h.l3_domains_per_socket));
    } else {
      check(15, l3ps == h.l3_domains_per_socket,
            fmt::format("L3 domains (CCX) per socket: profile {}, host {}", h.l3_domains_per_socket,
                        l3ps));
      uint64_t l3 = t.l3_domains.empty() ? 0 : t.l3_domains.front().size_bytes;
      if (h.l3_bytes)
        check(
            5, l3 == h.l3_bytes,
            fmt::format("L3 per domain: profile {} MiB, host {} MiB", h.l3_bytes >> 20, l3 >> 20));
    }
  }
  if (!h.brand_contains.empty()) {
    total += 5;
    if (cpu.brand.find(h.brand_contains) != std::string::npos) {
      got += 5;
      m.reasons.push_back(fmt::format("brand \"{}\" names {}", cpu.brand, h.brand_contains));
    } else {
      m.reasons.push_back(
          fmt::format("brand \"{}\" does not name {} (VMs often hide it; not decisive)", cpu.brand,
                      h.brand_contains));
    }
  }
  int nps = t.nodes_per_socket();
  if (!h.nps_supported.empty() &&
      std::find(h.nps_supported.begin(), h.nps_supported.end(), nps) == h.nps_supported.end())
    m.reasons.push_back(
        fmt::format("host runs {} NUMA nodes per socket, which this part does not offer "
                    "as an NPS mode",
                    nps));
  m.matches = m.mismatches.empty();
  m.score = total ? got * 100 / total : 0;
  return m;
}

void require_match(const Profile& p, const host::Topology& t, bool force) {
  if (force) return;
  auto m = match_profile(p, t);
  if (m.matches) return;
  std::vector<Diagnostic> d;
  for (const auto& mm : m.mismatches)
    d.push_back(
        {p.source_file.empty() ? p.name : p.source_file, 0, 0,
         fmt::format("profile {} does not fit this host: {}", p.name, mm),
         "pick the profile for this machine (epyctune detect), or --force to use it anyway"});
  throw ProfileError(std::move(d));
}

}  // namespace epyctune::profile
