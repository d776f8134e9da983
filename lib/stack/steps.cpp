#include "stack/steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "stack/confine.hpp"
#include "stack/text_util.hpp"

namespace epyctune::stack {

namespace {

std::vector<Step>& registry() {
  static std::vector<Step> steps;
  return steps;
}

int step_number(const std::string& item) {
  for (const auto& s : all_steps())
    if (s.name == item || std::to_string(s.number) == item) return s.number;
  std::string names;
  for (const auto& s : all_steps()) names += fmt::format(" {}={}", s.number, s.name);
  throw std::invalid_argument(fmt::format("unknown step '{}' (steps:{})", item, names));
}

}  // namespace

StepRegistrar::StepRegistrar(Step step) {
  auto& steps = registry();
  for (const auto& s : steps)
    if (s.number == step.number || s.name == step.name)
      throw std::logic_error(fmt::format("step {} '{}' clashes with step {} '{}'", step.number,
                                         step.name, s.number, s.name));
  // The loader reads the step's section and [expectations] key from here.
  profile::register_step_schema({step.number, step.name, step.build != nullptr, step.section});
  auto at = std::find_if(steps.begin(), steps.end(),
                         [&](const Step& s) { return s.number > step.number; });
  steps.insert(at, std::move(step));
}

const std::vector<Step>& all_steps() {
  return registry();
}

const Step* find_step(int number) {
  for (const auto& s : all_steps())
    if (s.number == number) return &s;
  return nullptr;
}

Confinement::Confinement(const profile::Profile& p)
    : where_(p.source_file.empty() ? "profile '" + p.name + "'" : p.source_file) {}

void Confinement::refuse(const std::string& key, const std::string& value,
                         const std::string& problem, const std::string& fix) const {
  throw std::invalid_argument(
      fmt::format("{}: {} = '{}' {}; {}", where_, key, value, problem, fix));
}

void Confinement::file_under(const std::string& key, const std::string& path, const char* dir,
                             const std::string& example) const {
  KnobLocation loc;
  loc.kind = KnobKind::File;
  loc.path = path;
  auto problem = location_problem(loc);
  if (problem.empty() && !std::string_view(path).starts_with(std::string(dir) + "/"))
    problem = fmt::format("is not under {}", dir);
  if (!problem.empty())
    refuse(key, path, problem, fmt::format("use a file under {} such as {}", dir, example));
}

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
      for (const auto& s : all_steps())
        if (s.number >= a && s.number <= b) out.push_back(s.number);
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
  std::vector<const Step*> selected;
  for (int n : steps)
    if (const Step* s = find_step(n)) selected.push_back(s);
  // Every selected step's paths and names before any knob is built, so a
  // profile cannot aim a write outside the stack's places.
  Confinement confinement(ctx.profile);
  for (const Step* s : selected)
    if (s->confine) s->confine(ctx.profile, confinement);
  std::vector<Knob> all;
  for (const Step* s : selected) {
    if (!s->build) continue;
    if (s->needs_partition && !ctx.partition_error.empty()) {
      all.push_back(unsupported_knob(s->name, s->title, "/",
                                     "needs the profile's partition, which does not fit this "
                                     "host: " +
                                         ctx.partition_error));
      if (s->reports_host_without_partition)
        for (auto& k : s->build(ctx))
          if (!k.unsupported.empty()) all.push_back(std::move(k));
      continue;
    }
    auto knobs = s->build(ctx);
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

}  // namespace epyctune::stack
