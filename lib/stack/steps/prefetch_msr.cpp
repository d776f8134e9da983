// Step 6: hardware prefetchers through MSR 0xC0000108 (PrefetchControl; a set
// bit disables a prefetcher), read-modify-write under the profile's mask on
// every selected CPU. Gated on AMD + family 25/26 + the CPUID bit that
// documents the MSR, and on the mask staying within the documented fields.
// Any other MSR is refused unless the profile whitelists it, and the old
// family-10h DC_CFG recipe (0xC0011022) is refused always.
#include <fmt/format.h>

#include "common/cpulist.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "prefetch";
constexpr uint32_t kPrefetchControl = 0xC0000108;
constexpr uint32_t kDcCfg = 0xC0011022;
// Profiles are checked for this when loaded; a profile built in code is not.
constexpr uint64_t kDocumentedPrefetchBits = profile::kPrefetchDocumentedBits;

// Why MSR writes cannot happen on this host/profile; "" when they can.
std::string refusal(const StepContext& ctx) {
  const auto& cpu = ctx.topo.cpu;
  if (cpu.vendor != "AuthenticAMD")
    return fmt::format("refused: MSR {:#x} is AMD's PrefetchControl and this CPU is '{}'",
                       kPrefetchControl, cpu.vendor.empty() ? "unknown" : cpu.vendor);
  if (cpu.family != 25 && cpu.family != 26)
    return fmt::format(
        "refused: CPU family {} ({:#x}) has no documented PrefetchControl MSR "
        "(needs family 25 Zen 3/4 or 26 Zen 5)",
        cpu.family, cpu.family);
  if (!cpu.prefetch_control)
    return "refused: CPUID Fn8000_0021 EAX[13] (PrefetchControl) is not set on this CPU "
           "(hypervisors often hide it)";
  const auto& lockdown = ctx.caps->lockdown;
  if (lockdown == "integrity" || lockdown == "confidentiality")
    return "kernel lockdown is on (/sys/kernel/security/lockdown): MSR writes are blocked";
  return "";
}

void add_msr(const StepContext& ctx, std::vector<Knob>& knobs, const std::vector<int>& cpus,
             uint32_t address, uint64_t mask, uint64_t value, const std::string& label) {
  for (int cpu : cpus) {
    std::string path = ctx.sys.msr_path(cpu);
    std::string name = fmt::format("cpu{} {}", cpu, label);
    if (!ctx.sys.exists(path)) {
      knobs.push_back(unsupported_knob(
          kStep, name, path, fmt::format("no {}: load the msr module (modprobe msr)", path)));
      continue;
    }
    Knob k;
    k.step = kStep;
    k.name = name;
    k.loc.kind = KnobKind::Msr;
    k.loc.path = path;
    k.loc.cpu = cpu;
    k.loc.msr = address;
    k.loc.mask = mask;
    k.desired = fmt::format("{:#x}", value & mask);
    k.capabilities = {"CAP_SYS_RAWIO"};
    knobs.push_back(std::move(k));
  }
}

}  // namespace

std::vector<Knob> prefetch_knobs(const StepContext& ctx) {
  const auto& pf = ctx.profile.prefetch;
  std::vector<Knob> knobs;
  if (!pf.enabled) return knobs;
  std::vector<int> cpus = pf.cpus == "all" ? ctx.topo.online_cpus : inference_cpus(ctx.part);
  std::string why = refusal(ctx);
  if (!why.empty()) {
    knobs.push_back(unsupported_knob(kStep, fmt::format("MSR {:#x}", pf.msr), "/dev/cpu", why));
    return knobs;
  }
  auto whitelisted = [&](uint32_t a) {
    for (const auto& e : pf.extra)
      if (e.address == a) return true;
    return false;
  };
  if (pf.msr == kDcCfg || (pf.msr != kPrefetchControl && !whitelisted(pf.msr))) {
    knobs.push_back(unsupported_knob(
        kStep, fmt::format("MSR {:#x}", pf.msr), "/dev/cpu",
        pf.msr == kDcCfg
            ? "refused: 0xC0011022 is the family-10h-era DC_CFG recipe; it is not a prefetch "
              "control on Zen and epyctune never writes it"
            : fmt::format("refused: prefetch.msr = {:#x} is not PrefetchControl (0xC0000108) and "
                          "is not whitelisted in prefetch.extra",
                          pf.msr)));
  } else if (pf.msr == kPrefetchControl && (pf.mask & ~kDocumentedPrefetchBits)) {
    knobs.push_back(unsupported_knob(
        kStep, "MSR 0xc0000108", "/dev/cpu",
        fmt::format("refused: prefetch.mask {:#x} reaches bits {:#x} of PrefetchControl, which are "
                    "not documented for family {:#x}{}; only {:#x} (L1Stream, L1Stride, L1Region, "
                    "L2Stream, L2UpDown) may be written",
                    pf.mask, pf.mask & ~kDocumentedPrefetchBits, ctx.topo.cpu.family,
                    ctx.topo.cpu.family == 0x1A ? " (Zen 5 resets them to 0x3C0)" : "",
                    kDocumentedPrefetchBits)));
  } else if (pf.msr == kPrefetchControl) {
    add_msr(ctx, knobs, cpus, pf.msr, pf.mask, pf.value, "PrefetchControl");
  }
  for (const auto& e : pf.extra) {
    if (e.address == kDcCfg) {
      knobs.push_back(unsupported_knob(
          kStep, "MSR 0xc0011022", "/dev/cpu",
          "refused even though whitelisted: 0xC0011022 is the family-10h-era DC_CFG recipe, not "
          "a prefetch control on Zen"));
      continue;
    }
    add_msr(ctx, knobs, cpus, e.address, e.mask, e.value,
            fmt::format("MSR {:#x} (whitelisted: {})", e.address, e.reason));
  }
  return knobs;
}

}  // namespace epyctune::stack
