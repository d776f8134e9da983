// Step 4: L3 cache allocation through resctrl. Two groups (draft, verify) with
// a capacity bitmask per L3 domain (per CCX); the root group keeps what the
// profile leaves to everything else. Tasks join a group when the engine
// launches, so this step only shapes the groups.
#include <fmt/format.h>

#include "stack/steps.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "cat";
constexpr const char* kRoot = "/sys/fs/resctrl";

// A profile mask ("all" or hex, as the loader accepted it) resolved and
// checked against the host; "" + reason when bad. open_session refuses a
// profile with a bad mask before any knob exists; this keeps knobs built
// without a session (tests, forced plans) from writing one.
std::string resolve_mask(const std::string& text, const std::string& field,
                         const host::ResctrlL3& l3, std::string& reason) {
  uint64_t m = 0;
  if (text == "all") {
    m = l3.cbm_mask;
  } else {
    try {
      m = parse_u64(text.rfind("0x", 0) == 0 ? text : "0x" + text);
    } catch (const std::exception&) {
      reason = fmt::format("profile cat.{} = '{}' is not a hex mask or \"all\"", field, text);
      return "";
    }
  }
  if (auto why = host::cat_mask_problem(m, l3); !why.empty()) {
    reason = fmt::format("profile cat.{}: {}", field, why);
    return "";
  }
  return fmt::format("{:x}", m);
}

Knob schemata_knob(const std::string& group, const std::string& path, int domain,
                   const std::string& mask) {
  Knob k;
  k.step = kStep;
  k.name = fmt::format("{} L3 domain {}", group, domain);
  k.loc.kind = KnobKind::Schemata;
  k.loc.path = path;
  k.loc.domain = domain;
  k.desired = mask;
  return k;
}

}  // namespace

std::vector<Knob> cat_knobs(const StepContext& ctx) {
  const auto& cat = ctx.profile.cat;
  std::vector<Knob> knobs;
  if (!cat.enabled) return knobs;
  std::string info = std::string(kRoot) + "/info/L3";
  if (!ctx.caps->l3cat.present) {
    bool kernel = ctx.caps->resctrl_kernel;
    if (kernel && !ctx.caps->resctrl_mounted) {
      auto k = check_knob(kStep, "resctrl mounted", "resctrl-mount", "not mounted", "mounted",
                          "resctrl is not mounted: run `mount -t resctrl resctrl /sys/fs/resctrl` "
                          "as root (CAP_SYS_ADMIN), or add it to /etc/fstab");
      knobs.push_back(std::move(k));
    } else {
      knobs.push_back(unsupported_knob(
          kStep, "L3 CAT", kRoot,
          kernel ? "resctrl is mounted but has no L3 allocation (info/L3 missing): the CPU or "
                   "hypervisor does not offer L3 CAT"
                 : "the kernel has no resctrl (CONFIG_X86_CPU_RESCTRL), or the CPU/VM lacks "
                   "L3 CAT (CPUID Fn8000_0010)"));
    }
    return knobs;
  }
  const host::ResctrlL3& rules = ctx.caps->l3cat;
  if (!rules.error.empty()) {
    knobs.push_back(unsupported_knob(kStep, "L3 CAT", info, rules.error));
    return knobs;
  }
  if (rules.num_closids < 3) {
    knobs.push_back(
        unsupported_knob(kStep, "L3 CAT", info + "/num_closids",
                         fmt::format("num_closids is {}: need 3 (root, {}, {})", rules.num_closids,
                                     cat.draft_group, cat.verify_group)));
    return knobs;
  }
  std::string reason;
  std::string draft = resolve_mask(cat.draft_cbm, "draft_cbm", rules, reason);
  std::string verify =
      reason.empty() ? resolve_mask(cat.verify_cbm, "verify_cbm", rules, reason) : "";
  std::string root =
      reason.empty() ? resolve_mask(cat.default_cbm, "default_cbm", rules, reason) : "";
  if (!reason.empty()) {
    knobs.push_back(unsupported_knob(kStep, "L3 CAT masks", info + "/cbm_mask", reason));
    return knobs;
  }
  auto cache_id = [&](int l3) {
    for (const auto& d : ctx.topo.l3_domains)
      if (d.index == l3) return d.cache_id;
    return l3;
  };
  struct Group {
    std::string name;
    const std::vector<int>* domains;
    std::string mask;
  };
  for (const auto& g : {Group{cat.draft_group, &ctx.part.draft_l3, draft},
                        Group{cat.verify_group, &ctx.part.verify_l3, verify}}) {
    std::string dir = std::string(kRoot) + "/" + g.name;
    Knob d;
    d.step = kStep;
    d.name = "group " + g.name;
    d.loc.kind = KnobKind::Dir;
    d.loc.path = dir;
    d.desired = "present";
    knobs.push_back(std::move(d));
    for (int l3 : *g.domains)
      knobs.push_back(schemata_knob(g.name, dir + "/schemata", cache_id(l3), g.mask));
  }
  std::vector<int> inference = ctx.part.draft_l3;
  inference.insert(inference.end(), ctx.part.verify_l3.begin(), ctx.part.verify_l3.end());
  for (int l3 : inference)
    knobs.push_back(
        schemata_knob("root group", std::string(kRoot) + "/schemata", cache_id(l3), root));
  return knobs;
}

}  // namespace epyctune::stack
