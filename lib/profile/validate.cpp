// Checks across keys, and against a host: what a single key's type and range
// cannot say. Each error points at the key that has to change.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>

#include "common/cpulist.hpp"
#include "profile/loader.hpp"

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
  const PrefetchStep& pf = p.prefetch;
  check_msr_address(c, "prefetch.msr", pf.msr);
  if (pf.msr != 0xC0000108)
    c.error("prefetch.msr",
            fmt::format("the prefetch step writes PrefetchControl, not {:#x}", pf.msr),
            "keep msr = 0xC0000108; list other MSRs under [[prefetch.extra]] with a reason");
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

uint64_t cbm_bits(const std::string& s) {
  return std::stoull(s, nullptr, 16);
}

void check_host(const Profile& p, const host::Topology& t, Checker& c) {
  int ndom = static_cast<int>(t.l3_domains.size());
  auto check_domains = [&](const char* key, const std::vector<int>& v) {
    for (int d : v)
      if (d >= ndom)
        c.error(
            key,
            fmt::format("L3 domain {} does not exist: this host has {} (0-{})", d, ndom, ndom - 1),
            "use L3 domain indices of this host (epyctune detect lists them)");
  };
  check_domains("partition.draft_l3", p.partition.draft_l3);
  check_domains("partition.verify_l3", p.partition.verify_l3);
  for (int core : p.partition.housekeeping_cores)
    if (core >= t.n_cores())
      c.error("partition.housekeeping_cores",
              fmt::format("core {} does not exist: this host has {} cores (0-{})", core,
                          t.n_cores(), t.n_cores() - 1),
              "use core indices of this host");
  for (int cpu : p.partition.housekeeping_cpus)
    if (!std::binary_search(t.online_cpus.begin(), t.online_cpus.end(), cpu))
      c.error("partition.housekeeping_cpus",
              fmt::format("CPU {} is not online on this host (online: {})", cpu,
                          common::format_cpulist(t.online_cpus)),
              "list online CPUs only");

  // Hugepages must leave the node room to run: at most 90% of its memory.
  const NumaStep& n = p.numa;
  int cpu_nodes = 0;
  for (const auto& node : t.numa_nodes) cpu_nodes += node.cpus.empty() ? 0 : 1;
  uint64_t per_node_2m =
      n.hugepages_2m_per_node >= 0
          ? static_cast<uint64_t>(n.hugepages_2m_per_node) << 21
          : static_cast<uint64_t>(n.model_gb * 1e9 * n.hugepage_headroom / std::max(cpu_nodes, 1));
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

void check_resctrl(const Profile& p, const host::Sysroot& root, Checker& c) {
  auto mask = root.read_value("/sys/fs/resctrl/info/L3/cbm_mask");
  if (!mask || mask->empty()) return;  // resctrl not mounted: the cat step reports it
  uint64_t full = 0;
  int min_bits = 1;
  try {
    full = std::stoull(*mask, nullptr, 16);
    if (auto m = root.read_value("/sys/fs/resctrl/info/L3/min_cbm_bits")) min_bits = std::stoi(*m);
  } catch (const std::logic_error&) {
    return;  // unreadable resctrl info: the cat step reports the host, not the profile
  }
  auto check = [&](const char* key, const std::string& cbm) {
    if (cbm == "all") return;
    uint64_t v = cbm_bits(cbm);
    if (v & ~full)
      c.error(key, fmt::format("mask {} has bits outside this host's cbm_mask {}", cbm, *mask),
              fmt::format("use bits within {} (info/L3/cbm_mask)", *mask));
    else if (std::popcount(v) < min_bits)
      c.error(key, fmt::format("mask {} has fewer than min_cbm_bits = {} ways", cbm, min_bits),
              "give the group more ways");
  };
  check("cat.draft_cbm", p.cat.draft_cbm);
  check("cat.verify_cbm", p.cat.verify_cbm);
  check("cat.default_cbm", p.cat.default_cbm);
}

}  // namespace

void validate_profile(const Profile& p, const host::Topology* topo, const host::Sysroot* root) {
  Checker c(p);
  check_host_free(p, c);
  if (topo) check_host(p, *topo, c);
  if (root) check_resctrl(p, *root, c);
  c.finish();
}

}  // namespace epyctune::profile
