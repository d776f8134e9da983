// Step 6: hardware prefetchers through MSR 0xC0000108 (PrefetchControl; a set
// bit disables a prefetcher), read-modify-write under the profile's mask on
// every selected CPU. Gated on AMD + family 25/26 + the CPUID bit that
// documents the MSR, and on the mask staying within the documented fields.
// Any other MSR is refused unless the profile whitelists it, and the old
// family-10h DC_CFG recipe (0xC0011022) is refused always.
#include <fmt/format.h>

#include <limits>

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

std::vector<Knob> build(const StepContext& ctx) {
  const auto& pf = ctx.profile.prefetch;
  std::vector<Knob> knobs;
  if (!pf.enabled) return knobs;
  std::vector<int> cpus = pf.cpus == "all" ? ctx.topo.online_cpus : ctx.part.inference_cpus();
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

void check_msr_address(profile::Checker& c, const std::string& key, uint32_t addr) {
  if (addr == kDcCfg)
    c.error(
        key, "MSR 0xC0011022 (DC_CFG) is refused",
        "the bit 13/15 prefetch recipe is for family 10h; on Zen use PrefetchControl 0xC0000108");
}

void check(const profile::PrefetchStep& pf, const profile::Profile&, profile::Checker& c) {
  check_msr_address(c, "prefetch.msr", pf.msr);
  if (pf.msr != kPrefetchControl)
    c.error("prefetch.msr",
            fmt::format("the prefetch step writes PrefetchControl, not {:#x}", pf.msr),
            "keep msr = 0xC0000108; list other MSRs under [[prefetch.extra]] with a reason");
  if (pf.mask & ~kDocumentedPrefetchBits)
    c.error(
        "prefetch.mask",
        fmt::format("prefetch.mask = {:#x} reaches PrefetchControl bits {:#x}, which AMD does not "
                    "document (Zen 5 resets bits 6-9 to 0x3C0 with no published meaning)",
                    pf.mask, pf.mask & ~kDocumentedPrefetchBits),
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

profile::Section section() {
  using profile::ExtraMsr;
  using profile::KeyReader;
  using profile::PrefetchStep;
  using profile::ShowAs;
  constexpr int64_t kU64 = std::numeric_limits<int64_t>::max();
  profile::Keys<ExtraMsr> extra;
  extra.integer("address", &ExtraMsr::address, 0, 0xFFFFFFFFll)
      .integer("mask", &ExtraMsr::mask, 0, kU64)
      .integer("value", &ExtraMsr::value, 0, kU64)
      .text("reason", &ExtraMsr::reason, profile::kLongText);
  profile::Keys<PrefetchStep> k;
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
  return profile::section_of(kStep, profile::field(&profile::Profile::prefetch), k, check);
}

// On the inference CPUs (or all). Who may write MSRs here is probed
// before any CPU is looked at.
const StepRegistrar registrar({
    .number = 6,
    .name = kStep,
    .title = "Hardware prefetcher MSRs",
    .section = section(),
    .needs_partition = true,
    .reports_host_without_partition = true,
    .build = build,
});

}  // namespace

}  // namespace epyctune::stack
