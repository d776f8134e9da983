// The launch plan computed once, from a profile and its partition resolved on
// the host: the only place the tuner decides which CPUs, nodes and resctrl
// groups the draft and the target get. Steps 7/8 write it, `epyctune plan`
// prints it, `epyctune run`/`bench` hand it to the engine.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "launch/launch_config.hpp"
#include "profile/profile.hpp"
#include "profile/resolve.hpp"

namespace epyctune::launch {

// Both [weights] and [spec]; no [models] (run/bench add those).
LaunchPlan plan_from_profile(const profile::Profile& p, const profile::HostPartition& part);

nlohmann::json to_json(const LaunchPlan& p);
// A few lines for `epyctune plan`, each starting with `indent`.
std::string to_text(const LaunchPlan& p, const std::string& indent = "  ");

}  // namespace epyctune::launch
