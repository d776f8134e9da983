// Steps 7 and 8 write the engine's launch config (/var/lib/epyctune/engine.toml
// by default): the NUMA weight layout and the speculative-decoding partition,
// one TOML section each, so each step's knob owns just its section and revert
// removes the file it created. Both sections come from the one launch plan
// (lib/launch), in the format the engine parses.
#include <fmt/format.h>

#include "launch/from_profile.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

std::vector<Knob> section_knob(const StepContext& ctx, const std::string& step,
                               const std::string& path, const std::string& section,
                               std::string text) {
  auto knobs = parent_dir_knobs(ctx.sys, step, path);
  Knob k;
  k.step = step;
  k.name = fmt::format("{} [{}]", path, section);
  k.loc.kind = KnobKind::File;
  k.loc.path = path;
  k.loc.section = section;
  k.desired = std::move(text);
  knobs.push_back(std::move(k));
  return knobs;
}

}  // namespace

std::vector<Knob> weights_knobs(const StepContext& ctx) {
  auto plan = launch::plan_from_profile(ctx.profile, ctx.part);
  return section_knob(ctx, "weights", ctx.profile.weights.launch_config, "weights",
                      launch::weights_section(plan));
}

std::vector<Knob> spec_knobs(const StepContext& ctx) {
  auto plan = launch::plan_from_profile(ctx.profile, ctx.part);
  return section_knob(ctx, "spec", ctx.profile.spec.launch_config, "spec",
                      launch::spec_section(plan));
}

}  // namespace epyctune::stack
