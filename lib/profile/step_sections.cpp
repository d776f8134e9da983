// The sections of the stack's steps.
#include <fmt/format.h>

#include <limits>

#include "profile/resolve.hpp"
#include "profile/schema.hpp"
#include "profile/section.hpp"

namespace epyctune::profile::detail {

namespace {

constexpr uint32_t kDcCfg = 0xC0011022;

Section bios_section() {
  Keys<BiosStep> k;
  k.integer("expect_nps", &BiosStep::expect_nps, 0, 4)
      .choice("smt", &BiosStep::smt, {"on", "off", "keep"})
      .choice("determinism", &BiosStep::determinism, {"performance", "power", "any"})
      .choice("boost", &BiosStep::boost, {"on", "off", "keep"});
  auto check = [](const BiosStep& b, const Profile& p, Checker& c) {
    const auto& nps = p.hardware.nps_supported;
    if (!nps.empty() && b.expect_nps != 0 &&
        std::find(nps.begin(), nps.end(), b.expect_nps) == nps.end())
      c.error("bios.expect_nps", fmt::format("NPS{} is not offered by this machine", b.expect_nps),
              "use one of hardware.nps_supported");
  };
  return section_of("bios", field(&Profile::bios), k, check);
}

// Hugepages must leave the node room to run: at most 90% of its memory.
void check_numa_host(const NumaStep& n, const Profile&, const CheckHost& h, Checker& c) {
  if (!h.topo) return;
  const host::Topology& t = *h.topo;
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

Section numa_section() {
  Keys<NumaStep> k;
  k.flag("numa_balancing", &NumaStep::numa_balancing)
      .choice("thp", &NumaStep::thp, {"always", "madvise", "never", "keep"})
      .custom(
          "hugepages_2m_per_node",
          [](KeyReader& r, const char* key, NumaStep& n) {
            if (auto word = r.if_string(key)) {
              if (*word == "auto")
                n.hugepages_2m_per_node = -1;
              else
                r.error(key, r.dotted(key) + " must be \"auto\" or a page count",
                        "e.g. hugepages_2m_per_node = 2048 (4 GiB per node)");
            } else {
              r.get_int(key, n.hugepages_2m_per_node, 0, int64_t{1} << 30);
            }
          },
          [](const NumaStep& n) {
            return n.hugepages_2m_per_node < 0 ? nlohmann::json("auto")
                                               : nlohmann::json(n.hugepages_2m_per_node);
          })
      .integer("hugepages_1g_per_node", &NumaStep::hugepages_1g_per_node, 0, 1 << 20)
      .number("model_gb", &NumaStep::model_gb, 0, 4096)
      .number("hugepage_headroom", &NumaStep::hugepage_headroom, 1.0, 4.0);
  return section_of("numa", field(&Profile::numa), k, {}, check_numa_host);
}

Section isolation_section() {
  Keys<IsolationStep> k;
  k.flag("isolate", &IsolationStep::isolate)
      .flag("nohz_full", &IsolationStep::nohz_full)
      .flag("rcu_nocbs", &IsolationStep::rcu_nocbs)
      .flag("irq_affinity", &IsolationStep::irq_affinity)
      // GRUB sources /etc/default/grub.d/*.cfg: any other path would be a file
      // root writes for nothing, or one it must never write.
      .path("bootloader_dropin", &IsolationStep::bootloader_dropin, "/etc/default/grub.d", ".cfg",
            "/etc/default/grub.d/epyctune.cfg");
  return section_of("isolation", field(&Profile::isolation), k);
}

void check_cat(const CatStep& cat, const Profile&, Checker& c) {
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
}

void check_cat_host(const CatStep& cat, const Profile&, const CheckHost& h, Checker& c) {
  if (!h.l3cat) return;
  const host::ResctrlL3& l3 = *h.l3cat;
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

Section cat_section() {
  Keys<CatStep> k;
  k.flag("enabled", &CatStep::enabled)
      .identifier("draft_group", &CatStep::draft_group)
      .identifier("verify_group", &CatStep::verify_group)
      .cbm("draft_cbm", &CatStep::draft_cbm)
      .cbm("verify_cbm", &CatStep::verify_cbm)
      .cbm("default_cbm", &CatStep::default_cbm);
  return section_of("cat", field(&Profile::cat), k, check_cat, check_cat_host);
}

Section cpufreq_section() {
  Keys<CpufreqStep> k;
  k.choice("governor", &CpufreqStep::governor,
           {"performance", "powersave", "userspace", "schedutil", "ondemand", "conservative"})
      .freq("draft_freq", &CpufreqStep::draft_freq)
      .freq("verify_freq", &CpufreqStep::verify_freq)
      .choice("epp", &CpufreqStep::epp,
              {"default", "performance", "balance_performance", "balance_power", "power", "keep"});
  return section_of("cpufreq", field(&Profile::cpufreq), k);
}

void check_msr_address(Checker& c, const std::string& key, uint32_t addr) {
  if (addr == kDcCfg)
    c.error(
        key, "MSR 0xC0011022 (DC_CFG) is refused",
        "the bit 13/15 prefetch recipe is for family 10h; on Zen use PrefetchControl 0xC0000108");
}

void check_prefetch(const PrefetchStep& pf, const Profile&, Checker& c) {
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

Section prefetch_section() {
  constexpr int64_t kU64 = std::numeric_limits<int64_t>::max();
  Keys<ExtraMsr> extra;
  extra.integer("address", &ExtraMsr::address, 0, 0xFFFFFFFFll)
      .integer("mask", &ExtraMsr::mask, 0, kU64)
      .integer("value", &ExtraMsr::value, 0, kU64)
      .text("reason", &ExtraMsr::reason, kLongText);
  Keys<PrefetchStep> k;
  k.flag("enabled", &PrefetchStep::enabled)
      .integer("msr", &PrefetchStep::msr, 0, 0xFFFFFFFFll, ShowAs::Hex)
      .integer("mask", &PrefetchStep::mask, 0, kU64, ShowAs::Hex)
      .integer("value", &PrefetchStep::value, 0, kU64, ShowAs::Hex)
      .choice("cpus", &PrefetchStep::cpus, {"inference", "all"})
      .tables("extra", &PrefetchStep::extra, extra, "[[prefetch.extra]] address = 0x... ",
              [](KeyReader& x, const ExtraMsr& m) {
                if (!x.has("address") || m.reason.empty())
                  x.error_here("[[prefetch.extra]] needs an address and a reason",
                               "say which MSR and why the operator allows writing it");
              });
  return section_of("prefetch", field(&Profile::prefetch), k, check_prefetch);
}

Section weights_section() {
  Keys<WeightsStep> k;
  k.choice("layout", &WeightsStep::layout, {"interleave", "split", "local"})
      .flag("hugepages", &WeightsStep::hugepages)
      .path("launch_config", &WeightsStep::launch_config, "", ".toml",
            "/var/lib/epyctune/engine.toml");
  return section_of("weights", field(&Profile::weights), k);
}

Section spec_section() {
  Keys<SpecStep> k;
  k.choice("draft_source", &SpecStep::draft_source, {"model", "lookup", "cascade"})
      .integer("draft_len", &SpecStep::draft_len, 1, 64)
      .integer("draft_threads", &SpecStep::draft_threads, 0, 8192)
      .integer("verify_threads", &SpecStep::verify_threads, 0, 8192)
      .path("launch_config", &SpecStep::launch_config, "", ".toml",
            "/var/lib/epyctune/engine.toml");
  return section_of("spec", field(&Profile::spec), k);
}

}  // namespace

const std::vector<Section>& step_sections() {
  static const std::vector<Section> all = {
      bios_section(),    numa_section(),     isolation_section(), cat_section(),
      cpufreq_section(), prefetch_section(), weights_section(),   spec_section(),
  };
  return all;
}

}  // namespace epyctune::profile::detail
