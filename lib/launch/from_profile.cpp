#include "launch/from_profile.hpp"

#include <fmt/format.h>

#include "common/cpulist.hpp"

namespace epyctune::launch {

LaunchPlan plan_from_profile(const profile::Profile& p, const profile::HostPartition& part) {
  LaunchPlan l;
  l.profile = p.name;
  l.has_weights = l.has_spec = true;
  l.draft = part.draft;
  l.verify = part.verify;
  l.housekeeping_cpus = part.housekeeping_cpus;
  l.weights.layout = p.weights.layout;
  l.weights.hugepages = p.weights.hugepages;
  l.weights.target_nodes = target_weight_nodes(p.weights.layout, part.verify.nodes);
  l.weights.draft_nodes = part.draft.nodes;
  l.spec.draft_source = p.spec.draft_source;
  l.spec.draft_len = p.spec.draft_len;
  return l;
}

namespace {
nlohmann::json side_json(const Side& s) {
  return {{"l3", s.l3},
          {"cpus", common::format_cpulist(s.cpus)},
          {"nodes", s.nodes},
          {"threads", side_threads(s)},
          {"resctrl_group", s.group}};
}
std::string ints(const std::vector<int>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}
}  // namespace

nlohmann::json to_json(const LaunchPlan& p) {
  nlohmann::json j;
  j["profile"] = p.profile;
  if (p.has_spec) {
    j["draft"] = side_json(p.draft);
    j["verify"] = side_json(p.verify);
    j["housekeeping_cpus"] = common::format_cpulist(p.housekeeping_cpus);
    j["spec"] = {{"draft_source", p.spec.draft_source}, {"draft_len", p.spec.draft_len}};
  }
  if (p.has_weights)
    j["weights"] = {{"layout", p.weights.layout},
                    {"hugepages", p.weights.hugepages},
                    {"target_nodes", p.weights.target_nodes},
                    {"draft_nodes", p.weights.draft_nodes}};
  if (p.has_models)
    j["models"] = {
        {"target", p.models.target}, {"draft", p.models.draft}, {"lookup", p.models.lookup}};
  return j;
}

std::string to_text(const LaunchPlan& p, const std::string& in) {
  std::string out;
  auto side = [&](const char* name, const Side& s) {
    out += fmt::format("{}{:<7} L3 {}, CPUs {} ({} threads), nodes {}, resctrl group {}\n", in,
                       name, ints(s.l3), common::format_cpulist(s.cpus), side_threads(s),
                       ints(s.nodes), s.group.empty() ? "none" : s.group);
  };
  if (p.has_spec) {
    side("draft", p.draft);
    side("verify", p.verify);
    out += fmt::format("{}spec    {} drafts, {} tokens per verify pass\n", in, p.spec.draft_source,
                       p.spec.draft_len);
  }
  if (p.has_weights)
    out += fmt::format("{}weights {}, {}, target on nodes {}, draft on nodes {}\n", in,
                       p.weights.layout, p.weights.hugepages ? "hugepages" : "no hugepages",
                       ints(p.weights.target_nodes), ints(p.weights.draft_nodes));
  if (p.has_models)
    out += fmt::format("{}models  target {}{}{}\n", in, p.models.target,
                       p.models.draft.empty() ? "" : ", draft " + p.models.draft,
                       p.models.lookup > 0 ? fmt::format(", lookup {}", p.models.lookup) : "");
  return out;
}

}  // namespace epyctune::launch
