// Steps 7 and 8 write the engine's launch config (/var/lib/epyctune/engine.toml
// by default): the NUMA weight layout and the speculative-decoding partition,
// one TOML section each, so each step's knob owns just its section and revert
// removes the file it created.
#include <fmt/format.h>

#include <algorithm>

#include "common/cpulist.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

std::string int_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

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
  const auto& w = ctx.profile.weights;
  const auto& part = ctx.part;
  std::vector<int> nodes = part.verify_nodes;
  std::string placement;
  if (w.layout == "interleave") {
    placement = "pages of every layer interleaved over the verify nodes";
  } else if (w.layout == "split") {
    placement = "layers split in contiguous blocks, block i on verify node i";
  } else {
    placement = "every layer on the first verify node";
    if (nodes.size() > 1) nodes.resize(1);
  }
  std::string text = fmt::format(
      "[weights]\n"
      "# Step 7 (NUMA weight layout): {}.\n"
      "layout = \"{}\"\n"
      "target_nodes = {}\n"
      "draft_nodes = {}\n"
      "hugepages = {}\n",
      placement, w.layout, int_list(nodes), int_list(part.draft_nodes),
      w.hugepages ? "true" : "false");
  return section_knob(ctx, "weights", w.launch_config, "weights", text);
}

std::vector<Knob> spec_knobs(const StepContext& ctx) {
  const auto& s = ctx.profile.spec;
  const auto& part = ctx.part;
  int draft_threads =
      s.draft_threads > 0 ? s.draft_threads : static_cast<int>(part.draft_cpus.size());
  int verify_threads =
      s.verify_threads > 0 ? s.verify_threads : static_cast<int>(part.verify_cpus.size());
  std::string text = fmt::format(
      "[spec]\n"
      "# Step 8 (CCD speculative partition): the draft owns its CCD, the target the rest.\n"
      "draft_source = \"{}\"\n"
      "draft_len = {}\n"
      "draft_cpus = \"{}\"\n"
      "draft_nodes = {}\n"
      "draft_threads = {}\n"
      "verify_cpus = \"{}\"\n"
      "verify_nodes = {}\n"
      "verify_threads = {}\n"
      "housekeeping_cpus = \"{}\"\n",
      s.draft_source, s.draft_len, common::format_cpulist(part.draft_cpus),
      int_list(part.draft_nodes), draft_threads, common::format_cpulist(part.verify_cpus),
      int_list(part.verify_nodes), verify_threads, common::format_cpulist(part.housekeeping_cpus));
  if (ctx.profile.cat.enabled)
    text += fmt::format("draft_resctrl_group = \"{}\"\nverify_resctrl_group = \"{}\"\n",
                        ctx.profile.cat.draft_group, ctx.profile.cat.verify_group);
  return section_knob(ctx, "spec", s.launch_config, "spec", text);
}

}  // namespace epyctune::stack
