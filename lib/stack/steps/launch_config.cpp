// Steps 7 and 8 write the engine's launch config (/var/lib/epyctune/engine.toml
// by default): the NUMA weight layout and the speculative-decoding partition,
// one TOML section each, so each step's knob owns just its section and revert
// removes the file it created. Both sections come from the one launch plan
// (lib/launch), in the format the engine parses.
#include <fmt/format.h>

#include "launch/from_profile.hpp"
#include "stack/journal.hpp"
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

constexpr const char* kExample = "/var/lib/epyctune/engine.toml";

profile::Section weights_section() {
  using profile::WeightsStep;
  profile::Keys<WeightsStep> k;
  k.choice("layout", &WeightsStep::layout, {"interleave", "split", "local"})
      .flag("hugepages", &WeightsStep::hugepages)
      .path("launch_config", &WeightsStep::launch_config, "", ".toml", kExample);
  return profile::section_of("weights", profile::field(&profile::Profile::weights), k);
}

profile::Section spec_section() {
  using profile::SpecStep;
  profile::Keys<SpecStep> k;
  k.choice("draft_source", &SpecStep::draft_source, {"model", "lookup", "cascade"})
      .integer("draft_len", &SpecStep::draft_len, 1, 64)
      .integer("draft_threads", &SpecStep::draft_threads, 0, 8192)
      .integer("verify_threads", &SpecStep::verify_threads, 0, 8192)
      .path("launch_config", &SpecStep::launch_config, "", ".toml", kExample);
  return profile::section_of("spec", profile::field(&profile::Profile::spec), k);
}

// The launch config is state epyctune owns: under its state directory only.
void confine_weights(const profile::Profile& p, const Confinement& c) {
  c.file_under("[weights] launch_config", p.weights.launch_config, kStateDir, kExample);
}

void confine_spec(const profile::Profile& p, const Confinement& c) {
  c.file_under("[spec] launch_config", p.spec.launch_config, kStateDir, kExample);
}

const StepRegistrar weights({
    .number = 7,
    .name = "weights",
    .title = "NUMA weight layout (engine launch config)",
    .section = weights_section(),
    .needs_partition = true,
    .build = weights_knobs,
    .confine = confine_weights,
});

const StepRegistrar spec({
    .number = 8,
    .name = "spec",
    .title = "Speculative decoding CCD partition (engine launch config)",
    .section = spec_section(),
    .needs_partition = true,
    .drafts = true,
    .build = spec_knobs,
    .confine = confine_spec,
});

}  // namespace

}  // namespace epyctune::stack
