// `epyctune profile generate`: a complete profile for the host in hand, for
// every EPYC that has no built-in. Values come from the discovered topology
// (sockets, NPS, L3 domains, cores, SMT, memory per node), the host's resctrl
// rules and cpufreq files when there is a host to read, and the generation's
// documented facts (CCDs per L3 domain, memory channels, which MSRs exist).
// Every value is written with a comment giving its reason. The text is
// loaded, validated and resolved against the same topology before it is
// returned: generation never hands out a profile `plan` would refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "host/capabilities.hpp"
#include "host/sysroot.hpp"
#include "host/topology.hpp"
#include "profile/profile.hpp"
#include "profile/resolve.hpp"

namespace epyctune::profile {

class GenerateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What generation assumes without --model / --model-draft: a 7B Q4_0 target
// (3.9 GB, the built-ins' roofline model) and a 1B-class Q4_0 draft (0.7 GB).
inline constexpr uint64_t kDefaultTargetBytes = 3'900'000'000;
inline constexpr uint64_t kDefaultDraftBytes = 700'000'000;

struct ModelSize {
  uint64_t bytes = 0;  // 0 = the default above
  std::string path;    // for the comments; "" = the default
};

struct GenerateOptions {
  std::string name;  // "" = from the part: "epyc-7451-2s-generated"
  ModelSize target, draft;
  // Where the host came from, as the command line names it ("--sysroot
  // /tmp/h", "--topology x.xml", "" live): written into the header.
  std::string host_args;
};

// What the host offers beyond its topology; null members mean "not known"
// (a topology XML has no resctrl, no cpufreq, no CPUID bits).
struct HostFacts {
  const host::Sysroot* sys = nullptr;              // cpufreq files, for the comments
  std::optional<host::ResctrlL3> l3cat;            // nullopt: unknown (XML)
  std::optional<host::Capabilities> capabilities;  // nullopt: unknown (XML)
};

struct GeneratedProfile {
  std::string text;  // the TOML, comments included
  Profile profile;   // that text loaded
  HostPartition partition;
};

// Throws GenerateError naming what the host lacks (not AMD, no L3, a single
// L3 domain, models too large for the nodes' memory).
GeneratedProfile generate_profile(const host::Topology& t, const HostFacts& facts,
                                  const GenerateOptions& options);

// The command that writes a profile for this host, for `detect` to print:
// `epyctune profile generate --sysroot DIR -o DIR/etc/epyctune/profiles/NAME.toml`.
std::string generate_command(const host::Topology& t, const std::string& sysroot,
                             const std::string& topology_xml);

// The `epyctune plan` command for the profile generate_command writes.
std::string generated_plan_command(const host::Topology& t, const std::string& sysroot,
                                   const std::string& topology_xml);

// The name generate_profile gives this host's profile when none is asked for.
std::string generated_name(const host::Topology& t);

}  // namespace epyctune::profile
