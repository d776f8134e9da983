// Step 4: L3 cache allocation through resctrl. Two groups (draft, verify) with
// a capacity bitmask per L3 domain (per CCX); the root group keeps what the
// profile leaves to everything else. Tasks join a group when the engine
// launches, so this step only shapes the groups.
#include <fmt/format.h>

#include <utility>

#include "stack/confine.hpp"
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

std::vector<Knob> build(const StepContext& ctx) {
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
  for (const auto& g : {Group{cat.draft_group, &ctx.part.draft.l3, draft},
                        Group{cat.verify_group, &ctx.part.verify.l3, verify}}) {
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
  std::vector<int> inference = ctx.part.draft.l3;
  inference.insert(inference.end(), ctx.part.verify.l3.begin(), ctx.part.verify.l3.end());
  for (int l3 : inference)
    knobs.push_back(
        schemata_knob("root group", std::string(kRoot) + "/schemata", cache_id(l3), root));
  return knobs;
}

void check(const profile::CatStep& cat, const profile::Profile&, profile::Checker& c) {
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

void check_host(const profile::CatStep& cat, const profile::Profile&, const profile::CheckHost& h,
                profile::Checker& c) {
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

profile::Section section() {
  using profile::CatStep;
  profile::Keys<CatStep> k;
  k.flag("enabled", &CatStep::enabled)
      .identifier("draft_group", &CatStep::draft_group)
      .identifier("verify_group", &CatStep::verify_group)
      .cbm("draft_cbm", &CatStep::draft_cbm)
      .cbm("verify_cbm", &CatStep::verify_cbm)
      .cbm("default_cbm", &CatStep::default_cbm);
  return profile::section_of(kStep, profile::field(&profile::Profile::cat), k, check, check_host);
}

// The groups become directories under /sys/fs/resctrl: never one of
// resctrl's own, and nothing a path could escape with.
void confine(const profile::Profile& p, const Confinement& c) {
  if (!p.cat.enabled) return;
  for (const auto& [key, name] : {std::pair{"[cat] draft_group", &p.cat.draft_group},
                                  std::pair{"[cat] verify_group", &p.cat.verify_group}}) {
    auto problem = component_problem(*name);
    if (problem.empty() && (*name == "info" || *name == "mon_groups" || *name == "mon_data"))
      problem = "is a directory resctrl itself owns";
    if (problem.empty() && name->find_first_of(" \t\"'") != std::string::npos)
      problem = "holds a space or quote";
    if (!problem.empty())
      c.refuse(key, *name, problem, "use a plain resctrl group name such as \"epyctune-draft\"");
  }
}

// The groups' masks are per inference L3 domain. CAT support is probed
// before any domain is looked at.
const StepRegistrar registrar({
    .number = 4,
    .name = kStep,
    .title = "L3 cache allocation (resctrl)",
    .section = section(),
    .needs_partition = true,
    .reports_host_without_partition = true,
    .build = build,
    .confine = confine,
});

}  // namespace

}  // namespace epyctune::stack
