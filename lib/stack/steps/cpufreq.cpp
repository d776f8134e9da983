// Step 5: per-CCD frequency. The draft CCD runs at its maximum; the verify CCDs
// at the profile's value. How to pin a frequency depends on the driver:
// acpi-cpufreq and amd-pstate passive/guided offer the userspace governor and
// scaling_setspeed; amd-pstate active (amd-pstate-epp) has neither, so the
// frequency is pinned with scaling_min_freq = scaling_max_freq, plus EPP.
#include <fmt/format.h>

#include "stack/steps.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "cpufreq";

std::string cpufreq_dir(int cpu) {
  return fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq", cpu);
}

enum class Mode { Acpi, PstateActive, PstatePassive, Other };

Mode driver_mode(const host::Sysroot& sys, const std::string& driver) {
  if (driver == "amd-pstate-epp") return Mode::PstateActive;
  if (driver == "amd-pstate") {
    auto status = sys.read_value("/sys/devices/system/cpu/amd_pstate/status").value_or("passive");
    return status == "active" ? Mode::PstateActive : Mode::PstatePassive;
  }
  if (driver == "acpi-cpufreq") return Mode::Acpi;
  return Mode::Other;
}

bool offers(const host::Sysroot& sys, const std::string& file, const std::string& word) {
  auto list = sys.read_value(file).value_or("");
  return (" " + list + " ").find(" " + word + " ") != std::string::npos;
}

void add_cpu(const StepContext& ctx, std::vector<Knob>& knobs, int cpu, Mode mode,
             const std::string& freq, const std::string& field) {
  const auto& sys = ctx.sys;
  std::string dir = cpufreq_dir(cpu);
  std::string who = fmt::format("cpu{}", cpu);
  uint64_t lo = 0, hi = 0, cur_max = 0;
  try {
    lo = parse_u64(sys.read_value(dir + "/cpuinfo_min_freq").value_or(""));
    hi = parse_u64(sys.read_value(dir + "/cpuinfo_max_freq").value_or(""));
    cur_max = parse_u64(sys.read_value(dir + "/scaling_max_freq").value_or(""));
  } catch (const std::exception&) {
    knobs.push_back(unsupported_knob(kStep, who, dir,
                                     fmt::format("{} has no readable cpuinfo_min/max_freq and "
                                                 "scaling_max_freq",
                                                 dir)));
    return;
  }
  uint64_t target = 0;
  if (freq == "max") {
    target = hi;
  } else if (freq == "min") {
    target = lo;
  } else {
    try {
      target = parse_u64(freq);
    } catch (const std::exception&) {
      knobs.push_back(unsupported_knob(kStep, who, dir,
                                       fmt::format("profile {} = '{}' is not max, min or a kHz "
                                                   "number",
                                                   field, freq)));
      return;
    }
    if (target < lo || target > hi) {
      knobs.push_back(
          unsupported_knob(kStep, who, dir,
                           fmt::format("profile {} = {} kHz is outside cpu{}'s range {}-{} kHz",
                                       field, target, cpu, lo, hi)));
      return;
    }
  }
  const std::string& gov = ctx.profile.cpufreq.governor;
  auto gov_knob = [&](const std::string& g) {
    if (!offers(sys, dir + "/scaling_available_governors", g))
      return unsupported_knob(kStep, who + " governor", dir + "/scaling_governor",
                              fmt::format("governor '{}' is not offered ({})", g,
                                          sys.read_value(dir + "/scaling_available_governors")
                                              .value_or("no scaling_available_governors")));
    return value_knob(kStep, who + " governor", dir + "/scaling_governor", Canon::Plain, g);
  };
  auto freq_knob = [&](const char* file, uint64_t khz) {
    return value_knob(kStep, fmt::format("{} {}", who, file), dir + "/" + file, Canon::Int,
                      std::to_string(khz));
  };
  // The kernel refuses min > max: raise max before min, lower min before max.
  auto pin = [&](uint64_t min_khz, uint64_t max_khz) {
    if (max_khz >= cur_max) {
      knobs.push_back(freq_knob("scaling_max_freq", max_khz));
      knobs.push_back(freq_knob("scaling_min_freq", min_khz));
    } else {
      knobs.push_back(freq_knob("scaling_min_freq", min_khz));
      knobs.push_back(freq_knob("scaling_max_freq", max_khz));
    }
  };
  if (mode == Mode::PstateActive) {
    if (gov == "userspace") {
      knobs.push_back(unsupported_knob(
          kStep, who + " governor", dir + "/scaling_governor",
          "amd-pstate in active mode has no userspace governor: set cpufreq.governor = "
          "\"performance\" (the frequency is pinned with scaling_min/max_freq)"));
      return;
    }
    knobs.push_back(gov_knob(gov));
    if (sys.exists(dir + "/energy_performance_preference"))
      knobs.push_back(value_knob(kStep, who + " EPP", dir + "/energy_performance_preference",
                                 Canon::Plain, ctx.profile.cpufreq.epp));
    pin(target, target);
    return;
  }
  if (freq == "max") {
    knobs.push_back(gov_knob(gov == "userspace" ? "performance" : gov));
    knobs.push_back(freq_knob("scaling_max_freq", hi));  // lift any cap left by an earlier tool
    return;
  }
  knobs.push_back(gov_knob("userspace"));
  if (!sys.exists(dir + "/scaling_setspeed")) {
    knobs.push_back(unsupported_knob(kStep, who + " setspeed", dir + "/scaling_setspeed",
                                     "no scaling_setspeed although the driver offers userspace"));
    return;
  }
  knobs.push_back(freq_knob("scaling_setspeed", target));
}

std::vector<Knob> build(const StepContext& ctx) {
  std::vector<Knob> knobs;
  auto inference = ctx.part.inference_cpus();
  int probe = !inference.empty()              ? inference.front()
              : !ctx.topo.online_cpus.empty() ? ctx.topo.online_cpus.front()
                                              : 0;
  auto driver = ctx.sys.read_value(cpufreq_dir(probe) + "/scaling_driver");
  if (!driver) {
    knobs.push_back(unsupported_knob(kStep, "cpufreq", cpufreq_dir(probe),
                                     "no cpufreq driver (a VM, or cpufreq disabled in BIOS: "
                                     "enable CPPC / P-states)"));
    return knobs;
  }
  Mode mode = driver_mode(ctx.sys, *driver);
  if (mode == Mode::Other) {
    knobs.push_back(unsupported_knob(kStep, "cpufreq", cpufreq_dir(probe),
                                     fmt::format("cpufreq driver '{}' is not one epyctune knows "
                                                 "(acpi-cpufreq, amd-pstate, amd-pstate-epp)",
                                                 *driver)));
    return knobs;
  }
  for (int cpu : ctx.part.draft.cpus)
    add_cpu(ctx, knobs, cpu, mode, ctx.profile.cpufreq.draft_freq, "cpufreq.draft_freq");
  for (int cpu : ctx.part.verify.cpus)
    add_cpu(ctx, knobs, cpu, mode, ctx.profile.cpufreq.verify_freq, "cpufreq.verify_freq");
  return knobs;
}

profile::Section section() {
  using profile::CpufreqStep;
  profile::Keys<CpufreqStep> k;
  k.choice("governor", &CpufreqStep::governor,
           {"performance", "powersave", "userspace", "schedutil", "ondemand", "conservative"})
      .freq("draft_freq", &CpufreqStep::draft_freq)
      .freq("verify_freq", &CpufreqStep::verify_freq)
      .choice("epp", &CpufreqStep::epp,
              {"default", "performance", "balance_performance", "balance_power", "power", "keep"});
  return profile::section_of(kStep, profile::field(&profile::Profile::cpufreq), k);
}

// Per draft and verify CPU. The cpufreq driver is probed before any CPU is
// looked at.
const StepRegistrar registrar({
    .number = 5,
    .name = kStep,
    .title = "Per-CCD frequency",
    .section = section(),
    .needs_partition = true,
    .reports_host_without_partition = true,
    .build = build,
});

}  // namespace

}  // namespace epyctune::stack
