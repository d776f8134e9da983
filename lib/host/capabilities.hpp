// What this host lets epyctune change, each with the reason when it cannot.
// Read-only. Live and sysroot use the same files; only privilege checks
// differ: live asks uid/CapEff/lockdown, a sysroot counts a writable file as
// writable (fixtures are not privileged).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "host/topology.hpp"

namespace epyctune::host {

struct Capability {
  bool supported = false;
  std::string reason;  // why not, when !supported
  std::string detail;  // what is there: current state, sizes, ...
};

// resctrl's L3 allocation rules (sys/fs/resctrl/info/L3), parsed once.
struct ResctrlL3 {
  bool present = false;  // info/L3/cbm_mask exists (resctrl mounted with L3 CAT)
  std::string error;     // present but unparsable: what is wrong
  uint64_t cbm_mask = 0;
  int min_cbm_bits = 1;
  int num_closids = 0;
  // Non-contiguous masks allowed: info/L3/sparse_masks, or where the kernel
  // predates that file, the vendor's rule (AMD allows them, Intel does not).
  bool sparse_masks = false;
};

ResctrlL3 probe_resctrl_l3(const Sysroot& root, const CpuIdentity& cpu);

// Why `mask` may not be a CAT mask on this host ("" when it may): bits outside
// cbm_mask, fewer than min_cbm_bits, holes where masks must be contiguous.
std::string cat_mask_problem(uint64_t mask, const ResctrlL3& l3);

// The effective capability set (CapEff) of this process: about us, not about
// the host being tuned, so always read from the real /proc.
uint64_t effective_capabilities();

struct Capabilities {
  Capability smt_control, cpufreq, resctrl, msr, prefetch_control, hugepages_2m, hugepages_1g,
      numa_balancing, thp, irq_affinity;
  std::string cpufreq_driver;          // "acpi-cpufreq", "amd-pstate-epp", ...; "" if none
  std::vector<std::string> governors;  // scaling_available_governors
  std::string governor;                // current scaling_governor of the first CPU
  std::string amd_pstate_mode;         // amd_pstate/status: "active", "passive", "guided", ""
  std::string smt_state;               // smt/control: on|off|forceoff|notsupported|notimplemented
  std::vector<int> isolated_cpus, nohz_full_cpus;
  std::string cmdline;  // /proc/cmdline
  // resctrl
  bool resctrl_kernel = false;  // "resctrl" in /proc/filesystems
  bool resctrl_mounted = false;
  std::string cbm_mask;  // info/L3/cbm_mask ("ffff")
  int num_closids = 0;
  int min_cbm_bits = 0;
  ResctrlL3 l3cat;  // the same, parsed; what the cat step and profile checks use
  // privileges (live: the process; sysroot: not applicable, reported as true)
  bool root = false;
  bool cap_sys_rawio = false;
  std::string lockdown;  // "none", "integrity", "confidentiality", "" if unknown
  bool numa_balancing_on = false;
  std::string thp_mode;            // "always" | "madvise" | "never"
  int irqs = 0, managed_irqs = 0;  // managed: known from the IRQ debugfs when present
};

Capabilities probe_capabilities(const Sysroot& root, const Topology& topo);

// Whether an IRQ is kernel-managed (affinity writes fail with EIO), from the
// generic-IRQ debugfs (sys/kernel/debug/irq/irqs/N, "IRQD_AFFINITY_MANAGED");
// nullopt when that file is not there (debugfs not mounted or not built):
// then only a write attempt tells.
std::optional<bool> irq_is_managed(const Sysroot& root, int irq);

// "always [madvise] never" -> "madvise"; "" if nothing is bracketed.
std::string bracketed_choice(const std::string& sysfs_value);

}  // namespace epyctune::host
