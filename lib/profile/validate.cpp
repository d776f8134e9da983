// Checks across keys, and against a host: what a single key's type and range
// cannot say. Each error points at the key that has to change.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>

#include "common/cpulist.hpp"
#include "host/capabilities.hpp"
#include "profile/loader.hpp"
#include "profile/resolve.hpp"

namespace epyctune::profile {

namespace {

class Checker {
 public:
  explicit Checker(const Profile& p) : p_(p) {}
  void error(const std::string& key, std::string what, std::string fix) {
    auto it = p_.origins.find(key);
    if (it != p_.origins.end())
      diags_.push_back(
          {it->second.file, it->second.line, it->second.column, std::move(what), std::move(fix)});
    else
      diags_.push_back({p_.source_file.empty() ? p_.name : p_.source_file, 0, 0,
                        fmt::format("{}: {}", key, what), std::move(fix)});
  }
  void finish() {
    if (!diags_.empty()) throw ProfileError(std::move(diags_));
  }

 private:
  const Profile& p_;
  std::vector<Diagnostic> diags_;
};

constexpr uint32_t kDcCfg = 0xC0011022;

void check_msr_address(Checker& c, const std::string& key, uint32_t addr) {
  if (addr == kDcCfg)
    c.error(
        key, "MSR 0xC0011022 (DC_CFG) is refused",
        "the bit 13/15 prefetch recipe is for family 10h; on Zen use PrefetchControl 0xC0000108");
}

void check_host_free(const Profile& p, Checker& c) {
  const Partition& part = p.partition;
  if (part.draft_l3.empty())
    c.error("partition.draft_l3", "the draft has no L3 domains",
            "name the L3 domains (CCXs) the draft runs on, e.g. draft_l3 = [0]");
  std::set<int> draft(part.draft_l3.begin(), part.draft_l3.end());
  if (draft.size() != part.draft_l3.size())
    c.error("partition.draft_l3", "an L3 domain is listed twice", "list each domain once");
  for (int v : part.verify_l3)
    if (draft.count(v))
      c.error("partition.verify_l3", fmt::format("L3 domain {} is both draft and verify", v),
              "remove it from one of draft_l3 / verify_l3");
  const Hardware& h = p.hardware;
  if (!h.nps_supported.empty() && p.bios.expect_nps != 0 &&
      std::find(h.nps_supported.begin(), h.nps_supported.end(), p.bios.expect_nps) ==
          h.nps_supported.end())
    c.error("bios.expect_nps",
            fmt::format("NPS{} is not offered by this machine", p.bios.expect_nps),
            "use one of hardware.nps_supported");
  if (h.cores_per_socket && h.l3_domains_per_socket && h.cores_per_l3 &&
      h.cores_per_socket != h.l3_domains_per_socket * h.cores_per_l3)
    c.error("hardware.cores_per_socket",
            fmt::format("{} cores per socket != {} L3 domains x {} cores", h.cores_per_socket,
                        h.l3_domains_per_socket, h.cores_per_l3),
            "make cores_per_socket = l3_domains_per_socket x cores_per_l3");
  if (h.ccds_per_socket && h.l3_domains_per_socket && h.l3_domains_per_socket % h.ccds_per_socket)
    c.error("hardware.l3_domains_per_socket", "L3 domains are not a whole number per CCD",
            "a CCD holds one CCX (Zen 3/4) or two (Zen 4c)");
  const CatStep& cat = p.cat;
  // resctrl's own entries under /sys/fs/resctrl; a group by that name would
  // write into them.
  for (const char* reserved : {"info", "mon_groups", "mon_data"})
    for (const auto& [key, group] : {std::pair{"cat.draft_group", cat.draft_group},
                                     std::pair{"cat.verify_group", cat.verify_group}})
      if (group == reserved)
        c.error(key, fmt::format("\"{}\" is resctrl's own directory, not a group name", group),
                "pick another name, e.g. \"epyctune-draft\"");
  if (cat.draft_group == cat.verify_group)
    c.error("cat.verify_group",
            fmt::format("draft and verify share the resctrl group \"{}\"", cat.verify_group),
            "give each side its own group");
  const PrefetchStep& pf = p.prefetch;
  check_msr_address(c, "prefetch.msr", pf.msr);
  if (pf.msr != 0xC0000108)
    c.error("prefetch.msr",
            fmt::format("the prefetch step writes PrefetchControl, not {:#x}", pf.msr),
            "keep msr = 0xC0000108; list other MSRs under [[prefetch.extra]] with a reason");
  if (pf.mask & ~kPrefetchDocumentedBits)
    c.error(
        "prefetch.mask",
        fmt::format("prefetch.mask = {:#x} reaches PrefetchControl bits {:#x}, which AMD does not "
                    "document (Zen 5 resets bits 6-9 to 0x3C0 with no published meaning)",
                    pf.mask, pf.mask & ~kPrefetchDocumentedBits),
        "keep the mask within 0x2F: L1Stream 0x1, L1Stride 0x2, L1Region 0x4, L2Stream 0x8, "
        "L2UpDown 0x20");
  if (pf.value & ~pf.mask)
    c.error("prefetch.value",
            fmt::format("value {:#x} sets bits outside mask {:#x}", pf.value, pf.mask),
            "clear those bits or widen the mask");
  for (const auto& x : pf.extra) {
    check_msr_address(c, "prefetch.extra", x.address);
    if (x.mask == 0 || (x.value & ~x.mask))
      c.error("prefetch.extra",
              fmt::format("MSR {:#x}: mask {:#x}, value {:#x}", x.address, x.mask, x.value),
              "give a non-zero mask that covers every bit of value");
  }
}

void check_host(const Profile& p, const host::Topology& t, Checker& c) {
  int ndom = static_cast<int>(t.l3_domains.size());
  // One error per key, however many entries are wrong: a list such as
  // "0-8191" on a 64-CPU host is one mistake.
  auto check_domains = [&](const char* key, const std::vector<int>& v) {
    std::vector<int> bad;
    for (int d : v)
      if (d >= ndom) bad.push_back(d);
    if (!bad.empty())
      c.error(key,
              fmt::format("L3 domain{} {} {} not exist: this host has {} (0-{})",
                          bad.size() > 1 ? "s" : "", common::format_cpulist(bad),
                          bad.size() > 1 ? "do" : "does", ndom, ndom - 1),
              "use L3 domain indices of this host (epyctune detect lists them)");
  };
  check_domains("partition.draft_l3", p.partition.draft_l3);
  check_domains("partition.verify_l3", p.partition.verify_l3);
  std::vector<int> bad_cores;
  for (int core : p.partition.housekeeping_cores)
    if (core >= t.n_cores()) bad_cores.push_back(core);
  if (!bad_cores.empty())
    c.error("partition.housekeeping_cores",
            fmt::format("core{} {} {} not exist: this host has {} cores (0-{})",
                        bad_cores.size() > 1 ? "s" : "", common::format_cpulist(bad_cores),
                        bad_cores.size() > 1 ? "do" : "does", t.n_cores(), t.n_cores() - 1),
            "use core indices of this host");
  std::vector<int> offline;
  for (int cpu : p.partition.housekeeping_cpus)
    if (!std::binary_search(t.online_cpus.begin(), t.online_cpus.end(), cpu))
      offline.push_back(cpu);
  if (!offline.empty())
    c.error("partition.housekeeping_cpus",
            fmt::format("CPU{} {} {} not online on this host (online: {})",
                        offline.size() > 1 ? "s" : "", common::format_cpulist(offline),
                        offline.size() > 1 ? "are" : "is", common::format_cpulist(t.online_cpus)),
            "list online CPUs only");

  // Hugepages must leave the node room to run: at most 90% of its memory.
  const NumaStep& n = p.numa;
  int cpu_nodes = 0;
  for (const auto& node : t.numa_nodes) cpu_nodes += node.cpus.empty() ? 0 : 1;
  uint64_t per_node_2m = n.hugepages_2m_per_node >= 0
                             ? static_cast<uint64_t>(n.hugepages_2m_per_node) << 21
                             : static_cast<uint64_t>(auto_hugepages_2m_per_node(n, cpu_nodes))
                                   << 21;
  uint64_t need = per_node_2m + (static_cast<uint64_t>(n.hugepages_1g_per_node) << 30);
  for (const auto& node : t.numa_nodes) {
    if (node.cpus.empty() || node.memory_bytes == 0) continue;
    if (need > node.memory_bytes / 10 * 9) {
      std::string key =
          n.hugepages_2m_per_node >= 0 ? "numa.hugepages_2m_per_node" : "numa.model_gb";
      if (n.hugepages_1g_per_node > 0 && per_node_2m < need / 2) key = "numa.hugepages_1g_per_node";
      c.error(
          key,
          fmt::format("hugepages need {:.1f} GiB per node but node {} has {:.1f} GiB (at most 90% "
                      "may be reserved)",
                      static_cast<double>(need) / (1ull << 30), node.os_index,
                      static_cast<double>(node.memory_bytes) / (1ull << 30)),
          "reserve fewer pages, or a smaller model_gb for \"auto\"");
      break;
    }
  }
}

void check_cat(const Profile& p, const host::ResctrlL3& l3, Checker& c) {
  const CatStep& cat = p.cat;
  if (!cat.enabled || !l3.present) return;  // no L3 CAT here: the cat step says so
  if (!l3.error.empty())
    return c.error("cat.enabled", l3.error,
                   "fix the host's resctrl, or set cat.enabled = false (or skip step 4)");
  if (l3.num_closids < 3)
    c.error("cat.enabled",
            fmt::format("this host offers {} resctrl CLOSIDs (info/L3/num_closids); the cat "
                        "step needs 3: the root group, {} and {}",
                        l3.num_closids, cat.draft_group, cat.verify_group),
            "set cat.enabled = false, or skip step 4 (--steps)");
  auto check = [&](const char* key, const std::string& cbm) {
    if (cbm == "all") return;
    auto why = host::cat_mask_problem(std::stoull(cbm, nullptr, 16), l3);
    if (!why.empty())
      c.error(key, why,
              fmt::format("use at least {}{} bits within {:x}, or \"all\"", l3.min_cbm_bits,
                          l3.sparse_masks ? "" : " contiguous", l3.cbm_mask));
  };
  check("cat.draft_cbm", cat.draft_cbm);
  check("cat.verify_cbm", cat.verify_cbm);
  check("cat.default_cbm", cat.default_cbm);
}

}  // namespace

void validate_profile(const Profile& p, const host::Topology* topo, const host::Sysroot* root) {
  Checker c(p);
  check_host_free(p, c);
  if (topo) check_host(p, *topo, c);
  if (root) check_cat(p, host::probe_resctrl_l3(*root, topo ? topo->cpu : host::CpuIdentity{}), c);
  c.finish();
}

void validate_cat(const Profile& p, const host::ResctrlL3& l3) {
  Checker c(p);
  check_cat(p, l3, c);
  c.finish();
}

}  // namespace epyctune::profile
