// Step 1: what firmware owns (NPS, determinism) is checked with an instruction;
// what the kernel exposes at run time (SMT, boost) is a knob.
#include <fmt/format.h>

#include <algorithm>

#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "bios";
constexpr const char* kSmt = "/sys/devices/system/cpu/smt/control";
constexpr const char* kBoost = "/sys/devices/system/cpu/cpufreq/boost";

Knob nps_knob(const StepContext& ctx) {
  int sockets = std::max(1, ctx.topo.sockets);
  int nodes = static_cast<int>(ctx.topo.numa_nodes.size());
  std::string observed = nodes % sockets == 0
                             ? fmt::format("NPS{}", nodes / sockets)
                             : fmt::format("{} nodes on {} sockets", nodes, sockets);
  return check_knob(
      kStep, "NPS (NUMA nodes per socket)", "nps", observed,
      fmt::format("NPS{}", ctx.profile.bios.expect_nps),
      fmt::format("NUMA nodes per socket is a firmware setting: in BIOS setup set AMD CBS > DF "
                  "Common Options > Memory Addressing > NUMA nodes per socket = NPS{} (and 'ACPI "
                  "SRAT L3 Cache As NUMA Domain' = Disabled), then reboot",
                  ctx.profile.bios.expect_nps));
}

Knob smt_knob(const StepContext& ctx) {
  const std::string& want = ctx.profile.bios.smt;
  auto state = ctx.sys.read_value(kSmt);
  if (state && (*state == "forceoff" || *state == "notsupported" || *state == "notimplemented")) {
    // These states refuse writes; they can still satisfy "off".
    bool off_ok = want == "off" && *state != "notimplemented";
    std::string expected = off_ok ? *state : want;
    std::string why =
        *state == "forceoff"
            ? "SMT was disabled with nosmt=force on the kernel command line; remove it and reboot"
        : *state == "notsupported"
            ? "this CPU has no SMT (or it is disabled in BIOS: AMD CBS > CPU Common Options > "
              "SMT Control)"
            : "the kernel was built without SMT control (CONFIG_HOTPLUG_SMT)";
    return check_knob(kStep, "SMT", "smt", *state, expected,
                      fmt::format("smt/control reads '{}', which refuses writes: {}", *state, why));
  }
  return value_knob(kStep, "SMT", kSmt, Canon::Plain, want);
}

// acpi-cpufreq has one global switch; amd-pstate has one per policy (CPU).
std::vector<Knob> boost_knobs(const StepContext& ctx) {
  std::string want = ctx.profile.bios.boost == "on" ? "1" : "0";
  if (ctx.sys.exists(kBoost)) return {value_knob(kStep, "boost", kBoost, Canon::Int, want)};
  std::vector<Knob> knobs;
  // With SMT going off, the siblings go offline and their cpufreq dirs vanish.
  std::vector<int> cpus;
  if (ctx.profile.bios.smt == "off")
    for (const auto& core : ctx.topo.cores) cpus.push_back(core.cpus.front());
  else
    cpus = ctx.topo.online_cpus;
  for (int cpu : cpus) {
    std::string path = fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/boost", cpu);
    if (ctx.sys.exists(path))
      knobs.push_back(value_knob(kStep, fmt::format("cpu{} boost", cpu), path, Canon::Int, want));
  }
  if (knobs.empty()) {
    std::string driver =
        ctx.sys.read_value("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver").value_or("none");
    knobs.push_back(unsupported_knob(
        kStep, "boost", kBoost,
        fmt::format("neither {} nor per-CPU cpufreq/boost (cpufreq driver: {}): set Core "
                    "Performance Boost in BIOS setup instead",
                    kBoost, driver)));
  }
  return knobs;
}

std::vector<Knob> build(const StepContext& ctx) {
  std::vector<Knob> knobs;
  knobs.push_back(nps_knob(ctx));
  if (ctx.profile.bios.smt != "keep") knobs.push_back(smt_knob(ctx));
  if (ctx.profile.bios.boost != "keep")
    for (auto& k : boost_knobs(ctx)) knobs.push_back(std::move(k));
  if (ctx.profile.bios.determinism != "any") {
    // No kernel interface reports the determinism slider.
    auto k = check_knob(
        kStep, "determinism", "determinism", "not visible from the OS",
        ctx.profile.bios.determinism,
        fmt::format("determinism is firmware-only and not visible from the OS: check BIOS setup "
                    "AMD CBS > NBIO Common Options > SMU Common Options > Determinism Control = "
                    "Manual, Determinism Slider = {}",
                    ctx.profile.bios.determinism == "power" ? "Power" : "Performance"));
    k.informational = true;
    knobs.push_back(std::move(k));
  }
  return knobs;
}

profile::Section section() {
  using profile::BiosStep;
  profile::Keys<BiosStep> k;
  k.integer("expect_nps", &BiosStep::expect_nps, 0, 4)
      .choice("smt", &BiosStep::smt, {"on", "off", "keep"})
      .choice("determinism", &BiosStep::determinism, {"performance", "power", "any"})
      .choice("boost", &BiosStep::boost, {"on", "off", "keep"});
  auto check = [](const BiosStep& b, const profile::Profile& p, profile::Checker& c) {
    const auto& nps = p.hardware.nps_supported;
    if (!nps.empty() && b.expect_nps != 0 &&
        std::find(nps.begin(), nps.end(), b.expect_nps) == nps.end())
      c.error("bios.expect_nps", fmt::format("NPS{} is not offered by this machine", b.expect_nps),
              "use one of hardware.nps_supported");
  };
  return profile::section_of(kStep, profile::field(&profile::Profile::bios), k, check);
}

// Host-wide knobs (NPS, SMT, boost): no partition needed.
const StepRegistrar registrar({
    .number = 1,
    .name = kStep,
    .title = "BIOS checks: NPS, SMT, determinism, boost",
    .section = section(),
    .build = build,
});

}  // namespace

}  // namespace epyctune::stack
