// The nine steps of the stack. Each step is a function that turns the
// profile, the topology and the resolved partition into a list of knobs; the
// generic plan/apply/verify/revert machinery does the rest.
#pragma once

#include <string>
#include <vector>

#include "host/capabilities.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "profile/profile.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

struct StepContext {
  const host::Sysroot& sys;
  const profile::Profile& profile;
  const host::Topology& topo;
  const profile::ResolvedPartition& part;
  // Non-empty when the profile's partition does not fit this host and the
  // command was forced: knobs that need the partition are unsupported with it.
  std::string partition_error;
  // What the host offers, probed once per run (open_session); build_knobs
  // probes once itself when this is null. Steps read host facts from here
  // and from topo, never from sysfs again.
  const host::Capabilities* caps = nullptr;
};

struct StepInfo {
  int number;
  std::string name;  // used in --steps and as Knob::step
  std::string title;
};

// 1 bios, 2 numa, 3 isolation, 4 cat, 5 cpufreq, 6 prefetch, 7 weights, 8 spec, 9 verify.
const std::vector<StepInfo>& all_steps();
// "1,2,6", "bios,numa", "1-4", "" (= all). Throws std::invalid_argument naming the bad item.
std::vector<int> parse_steps(const std::string& spec);

std::vector<Knob> build_knobs(const StepContext& ctx, const std::vector<int>& steps);

// One builder per step, each in the file named after it.
std::vector<Knob> bios_knobs(const StepContext& ctx);       // steps/bios.cpp
std::vector<Knob> numa_knobs(const StepContext& ctx);       // steps/numa_hugepages.cpp
std::vector<Knob> isolation_knobs(const StepContext& ctx);  // steps/isolation_irqs.cpp
std::vector<Knob> cat_knobs(const StepContext& ctx);        // steps/l3_cat.cpp
std::vector<Knob> cpufreq_knobs(const StepContext& ctx);    // steps/cpufreq.cpp
std::vector<Knob> prefetch_knobs(const StepContext& ctx);   // steps/prefetch_msr.cpp
std::vector<Knob> weights_knobs(const StepContext& ctx);    // steps/launch_config.cpp
std::vector<Knob> spec_knobs(const StepContext& ctx);       // steps/launch_config.cpp

// Helpers shared by the step builders (steps.cpp).
Knob value_knob(const std::string& step, const std::string& name, const std::string& path,
                Canon canon, const std::string& desired);
Knob check_knob(const std::string& step, const std::string& name, const std::string& what,
                const std::string& observed, const std::string& expected,
                const std::string& instruction);
Knob unsupported_knob(const std::string& step, const std::string& name, const std::string& path,
                      const std::string& reason);
// Dir knobs for every missing ancestor of `path`, outermost first.
std::vector<Knob> parent_dir_knobs(const host::Sysroot& sys, const std::string& step,
                                   const std::string& path);
std::vector<int> inference_cpus(const profile::ResolvedPartition& part);

}  // namespace epyctune::stack
