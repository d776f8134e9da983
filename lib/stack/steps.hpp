// The steps of the stack. A step is one record (Step) in one registry: its
// number, name and title, its profile section, whether it needs the
// partition, and its knob builder, which turns the profile, the topology and
// the resolved partition into knobs; the generic plan/apply/verify/revert
// machinery does the rest. Each step file in steps/ registers its own record
// with a StepRegistrar; plan, apply, verify, revert, `profile show` and the
// bench iterate the registry.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "host/capabilities.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "profile/profile.hpp"
#include "profile/resolve.hpp"
#include "profile/section.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

struct StepContext {
  const host::Sysroot& sys;
  const profile::Profile& profile;
  const host::Topology& topo;
  const profile::HostPartition& part;
  // Non-empty when the profile's partition does not fit this host and the
  // command was forced: knobs that need the partition are unsupported with it.
  std::string partition_error;
  // What the host offers, probed once per run (open_session); build_knobs
  // probes once itself when this is null. Facts more than one step or check
  // needs (resctrl's rules, lockdown) come from here. A step reads the files
  // behind its own knobs itself (smt/control, cpufreq, /proc/irq), since
  // what they hold is what its knobs are made of.
  const host::Capabilities* caps = nullptr;
};

// Refuses a profile value that would aim a knob outside the stack's places,
// before any knob is built: throws std::invalid_argument naming the profile,
// the key, the value and the fix.
class Confinement {
 public:
  explicit Confinement(const profile::Profile& p);
  [[noreturn]] void refuse(const std::string& key, const std::string& value,
                           const std::string& problem, const std::string& fix) const;
  // `path` must be a file location below `dir`.
  void file_under(const std::string& key, const std::string& path, const char* dir,
                  const std::string& example) const;

 private:
  std::string where_;
};

struct Step {
  int number = 0;    // --steps 1-4, plan order; 0 is the bench's stock row
  std::string name;  // --steps bios, Knob::step, its [expectations] key
  std::string title;
  // Its [section] of the profile, when it has parameters: how the loader
  // reads and checks it and how `profile show` prints it.
  std::optional<profile::Section> section = std::nullopt;
  // Its knobs sit on the partition's CPUs, L3 domains or nodes: when the
  // partition does not fit the host (forced), the step is one unsupported
  // knob saying so.
  bool needs_partition = false;
  // Even then, its builder runs for what it finds the host lacks: it probes
  // the host before it looks at any CPU.
  bool reports_host_without_partition = false;
  // Applied, it has the engine draft (speculative decoding): the bench runs
  // its row with the drafter, and skips it without --draft or --lookup.
  bool drafts = false;
  // Null for a step that changes nothing (verify): no knobs, no bench row.
  std::vector<Knob> (*build)(const StepContext&) = nullptr;
  // Refuses profile values aimed outside the stack's places (Confinement);
  // runs for every selected step before any knob is built.
  void (*confine)(const profile::Profile&, const Confinement&) = nullptr;
};

// Registers a step from a static object in its file. Throws std::logic_error
// (so the program stops at start) when its number, name or section is taken.
class StepRegistrar {
 public:
  explicit StepRegistrar(Step step);
};

// Every registered step, by number. Complete once main() runs; not for use
// from another static initialiser.
const std::vector<Step>& all_steps();
const Step* find_step(int number);
// "1,2,6", "bios,numa", "1-4", "" (= all). Throws std::invalid_argument naming the bad item.
std::vector<int> parse_steps(const std::string& spec);

std::vector<Knob> build_knobs(const StepContext& ctx, const std::vector<int>& steps);

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

}  // namespace epyctune::stack
