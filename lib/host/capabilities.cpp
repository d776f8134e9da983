#include "host/capabilities.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <charconv>
#include <sstream>

#include "common/cpulist.hpp"
#include "common/text.hpp"

namespace epyctune::host {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::vector<int> cpulist_or_empty(const std::optional<std::string>& v) {
  if (!v || *v == "(null)") return {};  // older kernels print "(null)" for an unset nohz_full
  try {
    return common::parse_cpulist(*v);
  } catch (const std::invalid_argument&) {
    return {};
  }
}

// Bit 17 of CapEff = CAP_SYS_RAWIO.
bool live_cap_sys_rawio() {
  return (effective_capabilities() >> 17) & 1u;
}

// A sysfs hex word ("ffff", "0x7ff"): at most 64 bits.
std::optional<uint64_t> hex_u64(std::string_view v) {
  v = common::trim_view(v);
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) v.remove_prefix(2);
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return out;
}

std::optional<int> small_int(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  std::string_view t = common::trim_view(*v);
  int out = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size() || out < 0) return std::nullopt;
  return out;
}

void probe_smt(const Sysroot& r, Capabilities& c) {
  auto v = r.read_value("/sys/devices/system/cpu/smt/control");
  if (!v) {
    c.smt_control.reason = "no /sys/devices/system/cpu/smt/control (kernel without HOTPLUG_SMT)";
    return;
  }
  c.smt_state = *v;
  if (*v == "on" || *v == "off") {
    c.smt_control.supported = true;
    c.smt_control.detail = fmt::format("SMT {}, changeable at run time", *v);
  } else if (*v == "forceoff") {
    c.smt_control.reason =
        "smt/control is 'forceoff' (nosmt=force on the kernel command line): "
        "it refuses writes until reboot";
  } else {
    c.smt_control.reason = fmt::format(
        "smt/control is '{}': the CPU or firmware has no SMT to switch (BIOS setting)", *v);
  }
}

void probe_cpufreq(const Sysroot& r, const Topology& t, Capabilities& c) {
  int cpu = t.online_cpus.empty() ? 0 : t.online_cpus.front();
  std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/", cpu);
  c.amd_pstate_mode = r.read_value("/sys/devices/system/cpu/amd_pstate/status").value_or("");
  auto drv = r.read_value(base + "scaling_driver");
  if (!drv) {
    c.cpufreq.reason = fmt::format(
        "no cpufreq driver on cpu{} (usual in VMs: the hypervisor owns the clock)", cpu);
    return;
  }
  c.cpufreq_driver = *drv;
  c.governors = words(r.read_value(base + "scaling_available_governors").value_or(""));
  c.governor = r.read_value(base + "scaling_governor").value_or("");
  c.cpufreq.supported = true;
  c.cpufreq.detail =
      fmt::format("driver {}{}, governor {} (available: {}), {}-{} kHz", *drv,
                  c.amd_pstate_mode.empty() ? "" : " (" + c.amd_pstate_mode + ")", c.governor,
                  join(c.governors), r.read_value(base + "scaling_min_freq").value_or("?"),
                  r.read_value(base + "scaling_max_freq").value_or("?"));
}

void probe_resctrl(const Sysroot& r, const Topology& t, Capabilities& c) {
  c.l3cat = probe_resctrl_l3(r, t.cpu);
  auto fs = r.read("/proc/filesystems").value_or("");
  c.resctrl_kernel = fs.find("\tresctrl\n") != std::string::npos;
  auto mounts = r.read("/proc/mounts").value_or("");
  c.resctrl_mounted = mounts.find(" /sys/fs/resctrl resctrl ") != std::string::npos ||
                      r.exists("/sys/fs/resctrl/info/L3/cbm_mask");
  bool cpu_cat = t.cpu.has_flag("cat_l3");
  if (!t.cpu.flags.empty() && !cpu_cat) {
    c.resctrl.reason = "the CPU has no L3 cache allocation (no cat_l3 flag; VMs usually hide it)";
    return;
  }
  if (!c.resctrl_kernel && !c.resctrl_mounted) {
    c.resctrl.reason =
        "the kernel has no resctrl filesystem (CONFIG_X86_CPU_RESCTRL, boot with rdt=)";
    return;
  }
  c.resctrl.supported = true;
  if (c.resctrl_mounted) {
    c.cbm_mask = r.read_value("/sys/fs/resctrl/info/L3/cbm_mask").value_or("");
    c.num_closids = c.l3cat.num_closids;
    c.min_cbm_bits = c.l3cat.min_cbm_bits;
    c.resctrl.detail = fmt::format("mounted; cbm_mask {}, {} CLOSIDs, min_cbm_bits {}", c.cbm_mask,
                                   c.num_closids, c.min_cbm_bits);
  } else {
    c.resctrl.detail = "supported, not mounted (the cat step mounts /sys/fs/resctrl)";
  }
}

void probe_msr(const Sysroot& r, const Topology& t, Capabilities& c) {
  int cpu = t.online_cpus.empty() ? 0 : t.online_cpus.front();
  auto dev = r.msr_path(cpu);
  auto lock = r.read_value("/sys/kernel/security/lockdown");
  c.lockdown = lock ? bracketed_choice(*lock) : "";
  if (!r.exists(dev)) {
    c.msr.reason = fmt::format("no {} (load the msr module: modprobe msr)", dev);
    return;
  }
  if (!c.lockdown.empty() && c.lockdown != "none") {
    c.msr.reason = fmt::format("kernel lockdown is '{}': MSR writes are refused", c.lockdown);
    return;
  }
  if (r.is_live()) {
    if (!c.root) {
      c.msr.reason = fmt::format("{} needs root (running as uid {})", dev, ::geteuid());
      return;
    }
    if (!c.cap_sys_rawio) {
      c.msr.reason =
          "root without CAP_SYS_RAWIO (a container or a capability bounding set drops it)";
      return;
    }
  } else if (!r.open_beneath(dev, O_WRONLY | O_NONBLOCK)) {  // confined, like every access
    c.msr.reason = fmt::format("{} is not writable", r.resolve(dev).string());
    return;
  }
  c.msr.supported = true;
  c.msr.detail = fmt::format("{} present and writable", dev);
}

void probe_prefetch(const Topology& t, Capabilities& c) {
  if (t.cpu.vendor != "AuthenticAMD") {
    c.prefetch_control.reason = "not an AMD CPU";
  } else if (!t.cpu.prefetch_control) {
    c.prefetch_control.reason =
        t.cpu.hypervisor
            ? "CPUID Fn8000_0021 EAX[13] is clear: the hypervisor hides PrefetchControl"
            : "CPUID Fn8000_0021 EAX[13] is clear: no PrefetchControl MSR (Zen 3 and older)";
  } else if (!c.msr.supported) {
    c.prefetch_control.reason =
        "PrefetchControl exists but MSRs cannot be written: " + c.msr.reason;
  } else {
    c.prefetch_control.supported = true;
    c.prefetch_control.detail = "MSR 0xC0000108 documented (CPUID Fn8000_0021 EAX[13])";
  }
}

void probe_hugepages(const Sysroot& r, const Topology& t, Capabilities& c) {
  auto one = [&](const char* dir, Capability& cap, const char* what) {
    std::string base = fmt::format("/sys/kernel/mm/hugepages/{}/", dir);
    auto nr = r.read_value(base + "nr_hugepages");
    if (!nr) {
      cap.reason = fmt::format("no {} pages ({} missing)", what, base);
      return;
    }
    cap.supported = true;
    std::string per_node;
    for (const auto& n : t.numa_nodes) {
      auto v = r.read_value(fmt::format("/sys/devices/system/node/node{}/hugepages/{}/nr_hugepages",
                                        n.os_index, dir));
      per_node +=
          fmt::format("{}node{}={}", per_node.empty() ? "" : " ", n.os_index, v.value_or("?"));
    }
    cap.detail = fmt::format("{} reserved, free {}; per node: {}", *nr,
                             r.read_value(base + "free_hugepages").value_or("?"), per_node);
  };
  one("hugepages-2048kB", c.hugepages_2m, "2 MB");
  one("hugepages-1048576kB", c.hugepages_1g, "1 GB");
  if (!c.hugepages_1g.supported && !t.cpu.flags.empty() && !t.cpu.has_flag("pdpe1gb"))
    c.hugepages_1g.reason = "the CPU has no 1 GB pages (no pdpe1gb flag)";
}

void probe_irqs(const Sysroot& r, Capabilities& c) {
  if (!r.exists("/proc/irq/default_smp_affinity")) {
    c.irq_affinity.reason = "no /proc/irq/default_smp_affinity";
    return;
  }
  bool debugfs = false;
  for (const auto& name : r.list("/proc/irq")) {
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (!r.exists("/proc/irq/" + name + "/smp_affinity_list")) continue;
    ++c.irqs;
    if (auto m = irq_is_managed(r, std::stoi(name))) {
      debugfs = true;
      if (*m) ++c.managed_irqs;
    }
  }
  c.irq_affinity.supported = true;
  c.irq_affinity.detail =
      debugfs
          ? fmt::format("{} IRQs, {} kernel-managed (unchangeable)", c.irqs, c.managed_irqs)
          : fmt::format("{} IRQs; managed ones show up as EIO on write (no IRQ debugfs)", c.irqs);
}

}  // namespace

uint64_t effective_capabilities() {
  auto status = Sysroot("/").read("/proc/self/status");
  if (!status) return 0;
  auto pos = status->find("CapEff:");
  if (pos == std::string::npos) return 0;
  auto end = status->find('\n', pos);
  return hex_u64(status->substr(pos + 7, end == std::string::npos ? end : end - pos - 7))
      .value_or(0);
}

ResctrlL3 probe_resctrl_l3(const Sysroot& r, const CpuIdentity& cpu) {
  const std::string info = "/sys/fs/resctrl/info/L3/";
  ResctrlL3 l3;
  auto mask = r.read_value(info + "cbm_mask");
  if (!mask) return l3;
  l3.present = true;
  auto m = hex_u64(*mask);
  auto closids = small_int(r.read_value(info + "num_closids"));
  auto min_bits = small_int(r.read_value(info + "min_cbm_bits").value_or("1"));
  auto sparse = r.read_value(info + "sparse_masks");
  if (!m || *m == 0 || !closids || !min_bits || (sparse && *sparse != "0" && *sparse != "1")) {
    l3.error = fmt::format("cannot parse {}: cbm_mask '{}', num_closids '{}', min_cbm_bits '{}'",
                           info, mask->substr(0, 40),
                           r.read_value(info + "num_closids").value_or("missing").substr(0, 40),
                           r.read_value(info + "min_cbm_bits").value_or("missing").substr(0, 40));
    return l3;
  }
  l3.cbm_mask = *m;
  l3.num_closids = *closids;
  l3.min_cbm_bits = *min_bits;
  l3.sparse_masks = sparse ? *sparse == "1" : cpu.vendor == "AuthenticAMD";
  return l3;
}

std::string cat_mask_problem(uint64_t v, const ResctrlL3& l3) {
  if (v & ~l3.cbm_mask)
    return fmt::format("mask {:x} has bits outside this host's info/L3/cbm_mask {:x}", v,
                       l3.cbm_mask);
  if (std::popcount(v) < l3.min_cbm_bits)
    return fmt::format("mask {:x} has {} ways, fewer than info/L3/min_cbm_bits = {}", v,
                       std::popcount(v), l3.min_cbm_bits);
  uint64_t low = v & (~v + 1);  // lowest set bit
  bool contiguous = ((v + low) & v) == 0;
  if (!l3.sparse_masks && !contiguous)
    return fmt::format("mask {:x} is not contiguous and this host's info/L3/sparse_masks is 0", v);
  return "";
}

std::optional<bool> irq_is_managed(const Sysroot& root, int irq) {
  std::optional<std::string> text;
  try {
    text = root.read(fmt::format("/sys/kernel/debug/irq/irqs/{}", irq));
  } catch (const HostError&) {
    return std::nullopt;  // debugfs is root-only: unreadable = unknown
  }
  if (!text) return std::nullopt;
  return text->find("IRQD_AFFINITY_MANAGED") != std::string::npos;
}

std::string bracketed_choice(const std::string& v) {
  auto a = v.find('['), b = v.find(']');
  if (a == std::string::npos || b == std::string::npos || b < a) return "";
  return v.substr(a + 1, b - a - 1);
}

Capabilities probe_capabilities(const Sysroot& r, const Topology& t) {
  Capabilities c;
  if (r.is_live()) {
    c.root = ::geteuid() == 0;
    c.cap_sys_rawio = live_cap_sys_rawio();
  } else {
    c.root = c.cap_sys_rawio = true;  // a tree on disk has no privileges to check
  }
  probe_smt(r, c);
  probe_cpufreq(r, t, c);
  probe_resctrl(r, t, c);
  probe_msr(r, t, c);
  probe_prefetch(t, c);
  probe_hugepages(r, t, c);
  probe_irqs(r, c);
  if (auto nb = r.read_value("/proc/sys/kernel/numa_balancing")) {
    c.numa_balancing.supported = true;
    c.numa_balancing_on = *nb != "0";
    c.numa_balancing.detail = fmt::format("kernel.numa_balancing = {}", *nb);
  } else {
    c.numa_balancing.reason = "no /proc/sys/kernel/numa_balancing (kernel without NUMA_BALANCING)";
  }
  if (auto thp = r.read_value("/sys/kernel/mm/transparent_hugepage/enabled")) {
    c.thp.supported = true;
    c.thp_mode = bracketed_choice(*thp);
    c.thp.detail = fmt::format("enabled = {}", c.thp_mode);
  } else {
    c.thp.reason = "no /sys/kernel/mm/transparent_hugepage (kernel without THP)";
  }
  c.isolated_cpus = cpulist_or_empty(r.read_value("/sys/devices/system/cpu/isolated"));
  c.nohz_full_cpus = cpulist_or_empty(r.read_value("/sys/devices/system/cpu/nohz_full"));
  c.cmdline = r.read_value("/proc/cmdline").value_or("");
  return c;
}

}  // namespace epyctune::host
