// Step 3: keep the kernel off the inference CPUs. isolcpus/nohz_full/rcu_nocbs
// are boot parameters: checked in /proc/cmdline and sysfs, applied by writing a
// GRUB drop-in (never grub.cfg) and reporting that a reboot is required. IRQs
// move to the housekeeping CPUs at run time; managed IRQs cannot move.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "common/cpulist.hpp"
#include "stack/confine.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "isolation";

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Who would undo our IRQ placement: a running irqbalance, or one enabled at boot.
std::string irqbalance_state(const host::Sysroot& sys) {
  for (const auto& pid : sys.list("/proc")) {
    if (!all_digits(pid)) continue;
    auto comm = sys.read_value("/proc/" + pid + "/comm");
    if (comm && *comm == "irqbalance") return "running (pid " + pid + ")";
  }
  if (sys.exists("/etc/systemd/system/multi-user.target.wants/irqbalance.service"))
    return "enabled (starts at boot)";
  return "not running";
}

// Only these characters ever reach the drop-in: the loader confines names to
// them, and the parameters are fixed words and formatted CPU lists. Checked
// again here because the file is shell that update-grub sources as root.
bool inert(const std::string& s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

std::string dropin_text(const StepContext& ctx, const std::string& params) {
  const std::string& name = ctx.profile.name;
  return fmt::format(
      "# Written by `epyctune apply --profile {}`; `epyctune revert` removes it.\n"
      "# Boot parameters that isolate the inference CPUs. Run update-grub, then reboot.\n"
      "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT {}\"\n",
      name.size() <= 64 && inert(name, "._-") ? name : "(unnamed)", params);
}

void add_boot_knobs(const StepContext& ctx, std::vector<Knob>& knobs,
                    const std::vector<int>& inference) {
  const auto& iso = ctx.profile.isolation;
  std::string list = common::format_cpulist(inference);
  struct Param {
    bool on;
    std::string name, value, sysfs;
    Canon canon;
  };
  std::vector<Param> params = {
      {iso.isolate, "isolcpus", "managed_irq,domain," + list, "/sys/devices/system/cpu/isolated",
       Canon::FlagsCpulist},
      {iso.nohz_full, "nohz_full", list, "/sys/devices/system/cpu/nohz_full", Canon::Cpulist},
      {iso.rcu_nocbs, "rcu_nocbs", list, "", Canon::Cpulist},
  };
  std::string cmdline;
  for (const auto& p : params)
    if (p.on) cmdline += (cmdline.empty() ? "" : " ") + p.name + "=" + p.value;
  if (cmdline.empty()) return;
  if (!inert(cmdline, "_=,- ")) {
    knobs.push_back(unsupported_knob(kStep, "bootloader drop-in", iso.bootloader_dropin,
                                     "refused: the boot parameters are not plain CPU lists"));
    return;
  }

  const std::string& path = iso.bootloader_dropin;
  std::string fixer_key;
  bool grub = ctx.sys.exists("/etc/default/grub") || ctx.sys.is_dir("/etc/default/grub.d");
  if (!grub) {
    knobs.push_back(unsupported_knob(
        kStep, "bootloader drop-in", path,
        fmt::format("no /etc/default/grub: this host does not boot with GRUB; add '{}' to the "
                    "kernel command line of your bootloader",
                    cmdline)));
  } else {
    auto dirs = parent_dir_knobs(ctx.sys, kStep, path);
    knobs.insert(knobs.end(), dirs.begin(), dirs.end());
    Knob k;
    k.step = kStep;
    k.name = "bootloader drop-in";
    k.loc.kind = KnobKind::File;
    k.loc.path = path;
    k.desired = dropin_text(ctx, cmdline);
    k.reboot_required = true;
    fixer_key = k.loc.key();
    knobs.push_back(std::move(k));
  }
  for (const auto& p : params) {
    if (!p.on) continue;
    std::string instruction =
        fmt::format("{}={} is a boot parameter: {}", p.name, p.value,
                    grub ? "apply writes " + path + "; run update-grub and reboot"
                         : "add it to the kernel command line and reboot");
    Knob k;
    k.step = kStep;
    k.name = "cmdline " + p.name;
    k.loc.kind = KnobKind::Cmdline;
    k.loc.path = "/proc/cmdline";
    k.loc.param = p.name;
    k.loc.canon = p.canon;
    k.desired = p.value;
    k.read_only = true;
    k.instruction = instruction;
    k.satisfied_by = fixer_key;
    knobs.push_back(k);
    if (!p.sysfs.empty()) {
      // What the running kernel actually isolated (isolcpus flags are not shown there).
      auto s = value_knob(kStep, p.sysfs.substr(p.sysfs.rfind('/') + 1) + " CPUs", p.sysfs,
                          Canon::Cpulist, list);
      s.read_only = true;
      s.instruction = instruction;
      s.satisfied_by = fixer_key;
      knobs.push_back(std::move(s));
    }
  }
}

void add_irq_knobs(const StepContext& ctx, std::vector<Knob>& knobs,
                   const std::vector<int>& inference) {
  const auto& hk = ctx.part.housekeeping_cpus;
  if (hk.empty()) {
    knobs.push_back(unsupported_knob(kStep, "IRQ affinity", "/proc/irq",
                                     "the profile sets no housekeeping CPUs "
                                     "(partition.housekeeping_cores) to move IRQs to"));
    return;
  }
  std::string hk_list = common::format_cpulist(hk);
  std::string state = irqbalance_state(ctx.sys);
  knobs.push_back(check_knob(
      kStep, "irqbalance", "irqbalance", state, "not running",
      fmt::format("irqbalance is {}: it rewrites IRQ affinity every 10 s and would move IRQs back "
                  "onto the inference CPUs. Run `systemctl disable --now irqbalance`, or keep it "
                  "and set IRQBALANCE_BANNED_CPULIST={} in /etc/default/irqbalance",
                  state, common::format_cpulist(inference))));
  knobs.push_back(value_knob(kStep, "default IRQ affinity", "/proc/irq/default_smp_affinity",
                             Canon::Cpumask, common::format_cpumask(hk)));
  std::vector<int> irqs;
  for (const auto& irq : ctx.sys.list("/proc/irq"))
    if (all_digits(irq)) irqs.push_back(std::stoi(irq));
  std::sort(irqs.begin(), irqs.end());
  const std::string managed =
      "unchangeable: managed IRQ (the kernel spreads it over CPUs itself; isolcpus=managed_irq "
      "keeps it off isolated CPUs after reboot)";
  for (int irq : irqs) {
    std::string path = fmt::format("/proc/irq/{}/smp_affinity_list", irq);
    if (!ctx.sys.exists(path)) continue;
    std::string name = fmt::format("IRQ {} affinity", irq);
    // The generic-IRQ debugfs says which IRQs are managed; without it, the
    // kernel's EIO on write says the same.
    auto dbg = ctx.sys.read(fmt::format("/sys/kernel/debug/irq/irqs/{}", irq));
    if (dbg && dbg->find("IRQD_AFFINITY_MANAGED") != std::string::npos) {
      auto k = check_knob(kStep, name, fmt::format("irq-{}-managed", irq),
                          ctx.sys.read_value(path).value_or(""), "", managed);
      k.informational = true;
      knobs.push_back(std::move(k));
      continue;
    }
    auto k = value_knob(kStep, name, path, Canon::Cpulist, hk_list);
    k.eio_means = managed;
    knobs.push_back(std::move(k));
  }
}

std::vector<Knob> build(const StepContext& ctx) {
  std::vector<Knob> knobs;
  auto inference = ctx.part.inference_cpus();
  add_boot_knobs(ctx, knobs, inference);
  if (ctx.profile.isolation.irq_affinity) add_irq_knobs(ctx, knobs, inference);
  return knobs;
}

profile::Section section() {
  using profile::IsolationStep;
  profile::Keys<IsolationStep> k;
  k.flag("isolate", &IsolationStep::isolate)
      .flag("nohz_full", &IsolationStep::nohz_full)
      .flag("rcu_nocbs", &IsolationStep::rcu_nocbs)
      .flag("irq_affinity", &IsolationStep::irq_affinity)
      // GRUB sources /etc/default/grub.d/*.cfg: any other path would be a file
      // root writes for nothing, or one it must never write.
      .path("bootloader_dropin", &IsolationStep::bootloader_dropin, kGrubDropinDir, ".cfg",
            "/etc/default/grub.d/epyctune.cfg");
  return profile::section_of(kStep, profile::field(&profile::Profile::isolation), k);
}

// The drop-in is shell that update-grub sources as root: never anywhere GRUB
// does not read, nor outside its directory.
void confine(const profile::Profile& p, const Confinement& c) {
  const auto& iso = p.isolation;
  if (!iso.isolate && !iso.nohz_full && !iso.rcu_nocbs) return;
  c.file_under("[isolation] bootloader_dropin", iso.bootloader_dropin, kGrubDropinDir,
               "/etc/default/grub.d/epyctune.cfg");
  auto rest = iso.bootloader_dropin.substr(
      std::min(iso.bootloader_dropin.size(), std::string(kGrubDropinDir).size() + 1));
  if (rest.find('/') != std::string::npos)
    c.refuse("[isolation] bootloader_dropin", iso.bootloader_dropin,
             "is in a subdirectory, which GRUB does not read",
             "put it directly in /etc/default/grub.d");
}

const StepRegistrar registrar({
    .number = 3,
    .name = kStep,
    .title = "Core isolation and IRQ affinity",
    .section = section(),
    .needs_partition = true,
    .build = build,
    .confine = confine,
});

}  // namespace

}  // namespace epyctune::stack
