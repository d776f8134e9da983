#include "stack/steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "stack/confine.hpp"
#include "stack/journal.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

const std::vector<StepInfo>& all_steps() {
  static const std::vector<StepInfo> steps = {
      {1, "bios", "BIOS checks: NPS, SMT, determinism, boost"},
      {2, "numa", "NUMA policy and hugepages"},
      {3, "isolation", "Core isolation and IRQ affinity"},
      {4, "cat", "L3 cache allocation (resctrl)"},
      {5, "cpufreq", "Per-CCD frequency"},
      {6, "prefetch", "Hardware prefetcher MSRs"},
      {7, "weights", "NUMA weight layout (engine launch config)"},
      {8, "spec", "Speculative decoding CCD partition (engine launch config)"},
      {9, "verify", "Verification checklist (epyctune verify)"},
  };
  return steps;
}

namespace {

int step_number(const std::string& item) {
  for (const auto& s : all_steps())
    if (s.name == item || std::to_string(s.number) == item) return s.number;
  std::string names;
  for (const auto& s : all_steps()) names += fmt::format(" {}={}", s.number, s.name);
  throw std::invalid_argument(fmt::format("unknown step '{}' (steps:{})", item, names));
}

// The paths and names a profile puts into knob locations: checked before any
// knob is built, so a profile cannot aim a write outside the stack's places.
void check_profile_paths(const profile::Profile& p, const std::vector<int>& steps) {
  std::string where = p.source_file.empty() ? "profile '" + p.name + "'" : p.source_file;
  auto selected = [&](int s) { return std::find(steps.begin(), steps.end(), s) != steps.end(); };
  auto fail = [&](const std::string& field, const std::string& value, const std::string& problem,
                  const std::string& fix) {
    throw std::invalid_argument(
        fmt::format("{}: {} = '{}' {}; {}", where, field, value, problem, fix));
  };
  if (selected(4) && p.cat.enabled)
    for (const auto& [field, name] : {std::pair{"[cat] draft_group", &p.cat.draft_group},
                                      std::pair{"[cat] verify_group", &p.cat.verify_group}}) {
      auto problem = component_problem(*name);
      if (problem.empty() && (*name == "info" || *name == "mon_groups" || *name == "mon_data"))
        problem = "is a directory resctrl itself owns";
      if (problem.empty() && name->find_first_of(" \t\"'") != std::string::npos)
        problem = "holds a space or quote";
      if (!problem.empty())
        fail(field, *name, problem, "use a plain resctrl group name such as \"epyctune-draft\"");
    }
  auto file_under = [&](int step, const std::string& field, const std::string& path,
                        const char* dir, const std::string& example) {
    if (!selected(step)) return;
    KnobLocation loc;
    loc.kind = KnobKind::File;
    loc.path = path;
    auto problem = location_problem(loc);
    if (problem.empty() && !std::string_view(path).starts_with(std::string(dir) + "/"))
      problem = fmt::format("is not under {}", dir);
    if (!problem.empty())
      fail(field, path, problem, fmt::format("use a file under {} such as {}", dir, example));
  };
  if (p.isolation.isolate || p.isolation.nohz_full || p.isolation.rcu_nocbs) {
    file_under(3, "[isolation] bootloader_dropin", p.isolation.bootloader_dropin, kGrubDropinDir,
               "/etc/default/grub.d/epyctune.cfg");
    auto rest = p.isolation.bootloader_dropin.substr(
        std::min(p.isolation.bootloader_dropin.size(), std::string(kGrubDropinDir).size() + 1));
    if (selected(3) && rest.find('/') != std::string::npos)
      fail("[isolation] bootloader_dropin", p.isolation.bootloader_dropin,
           "is in a subdirectory, which GRUB does not read",
           "put it directly in /etc/default/grub.d");
  }
  file_under(7, "[weights] launch_config", p.weights.launch_config, kStateDir,
             "/var/lib/epyctune/engine.toml");
  file_under(8, "[spec] launch_config", p.spec.launch_config, kStateDir,
             "/var/lib/epyctune/engine.toml");
}

}  // namespace

std::vector<int> parse_steps(const std::string& spec) {
  std::vector<int> out;
  if (trim(spec).empty()) {
    for (const auto& s : all_steps()) out.push_back(s.number);
    return out;
  }
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    auto dash = item.find('-');
    if (dash != std::string::npos && dash > 0) {
      int a = step_number(item.substr(0, dash)), b = step_number(item.substr(dash + 1));
      if (a > b) throw std::invalid_argument(fmt::format("step range '{}' is backwards", item));
      for (int i = a; i <= b; ++i) out.push_back(i);
    } else {
      out.push_back(step_number(item));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<Knob> build_knobs(const StepContext& given, const std::vector<int>& steps) {
  std::optional<host::Capabilities> probed;
  if (!given.caps) probed = host::probe_capabilities(given.sys, given.topo);
  StepContext ctx = given;
  if (probed) ctx.caps = &*probed;
  using Builder = std::vector<Knob> (*)(const StepContext&);
  static const Builder builders[] = {bios_knobs,    numa_knobs,     isolation_knobs, cat_knobs,
                                     cpufreq_knobs, prefetch_knobs, weights_knobs,   spec_knobs};
  check_profile_paths(ctx.profile, steps);
  std::vector<Knob> all;
  for (int s : steps) {
    if (s < 1 || s > 8) continue;  // 9 is the checklist over the others
    // Host-wide knobs (NPS, SMT, boost, NUMA balancing, THP) need no partition.
    bool needs_partition = s >= 3;
    if (needs_partition && !ctx.partition_error.empty()) {
      const auto& info = all_steps()[static_cast<size_t>(s - 1)];
      all.push_back(unsupported_knob(info.name, info.title, "/",
                                     "needs the profile's partition, which does not fit this "
                                     "host: " +
                                         ctx.partition_error));
      // CAT, cpufreq and prefetch also depend on what the host offers: say that
      // too (their builders probe the host before looking at any CPU).
      if (s >= 4 && s <= 6)
        for (auto& k : builders[s - 1](ctx))
          if (!k.unsupported.empty()) all.push_back(std::move(k));
      continue;
    }
    auto knobs = builders[s - 1](ctx);
    all.insert(all.end(), std::make_move_iterator(knobs.begin()),
               std::make_move_iterator(knobs.end()));
  }
  return all;
}

Knob value_knob(const std::string& step, const std::string& name, const std::string& path,
                Canon canon, const std::string& desired) {
  Knob k;
  k.step = step;
  k.name = name;
  k.loc.kind = KnobKind::Value;
  k.loc.path = path;
  k.loc.canon = canon;
  k.desired = desired;
  return k;
}

Knob check_knob(const std::string& step, const std::string& name, const std::string& what,
                const std::string& observed, const std::string& expected,
                const std::string& instruction) {
  Knob k;
  k.step = step;
  k.name = name;
  k.loc.kind = KnobKind::Check;
  k.loc.path = "/";
  k.loc.param = what;
  k.read_only = true;
  k.observed = observed;
  k.desired = expected;
  k.instruction = instruction;
  return k;
}

Knob unsupported_knob(const std::string& step, const std::string& name, const std::string& path,
                      const std::string& reason) {
  Knob k;
  k.step = step;
  k.name = name;
  k.loc.kind = KnobKind::Check;
  k.loc.path = path.empty() ? "/" : path;
  k.loc.param = name;
  k.unsupported = reason;
  return k;
}

std::vector<Knob> parent_dir_knobs(const host::Sysroot& sys, const std::string& step,
                                   const std::string& path) {
  std::vector<Knob> out;
  std::string dir = path.substr(0, path.rfind('/'));
  while (!dir.empty() && !sys.is_dir(dir)) {
    Knob k;
    k.step = step;
    k.name = "directory " + dir;
    k.loc.kind = KnobKind::Dir;
    k.loc.path = dir;
    k.desired = "present";
    out.insert(out.begin(), std::move(k));
    dir = dir.substr(0, dir.rfind('/'));
  }
  return out;
}

std::vector<int> inference_cpus(const profile::ResolvedPartition& part) {
  std::vector<int> cpus = part.draft_cpus;
  cpus.insert(cpus.end(), part.verify_cpus.begin(), part.verify_cpus.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace epyctune::stack
