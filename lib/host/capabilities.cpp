#include "host/capabilities.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <sstream>

#include "common/cpulist.hpp"

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

int int_or(const std::optional<std::string>& v, int fallback) {
  int out = fallback;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
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

// CapEff from /proc/self/status, bit 17 = CAP_SYS_RAWIO.
bool live_cap_sys_rawio() {
  Sysroot live("/");
  auto status = live.read("/proc/self/status");
  if (!status) return false;
  auto pos = status->find("CapEff:");
  if (pos == std::string::npos) return false;
  uint64_t caps = std::stoull(status->substr(pos + 7), nullptr, 16);
  return (caps >> 17) & 1u;
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
    c.num_closids = int_or(r.read_value("/sys/fs/resctrl/info/L3/num_closids"), 0);
    c.min_cbm_bits = int_or(r.read_value("/sys/fs/resctrl/info/L3/min_cbm_bits"), 0);
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
