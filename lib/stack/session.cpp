#include "stack/session.hpp"

#include "host/discover.hpp"
#include "profile/loader.hpp"
#include "profile/resolve.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

Session open_session(const SessionOptions& opts) {
  auto steps = parse_steps(opts.steps);  // bad --steps fails before any discovery
  host::Sysroot sys(opts.sysroot);
  host::DiscoverOptions d;
  d.topology_xml = opts.topology_xml;
  host::Topology topo = host::discover(sys, d);
  profile::Profile prof = profile::load_profile(opts.profile, &sys);
  auto match = profile::match_profile(prof, topo);
  profile::require_match(prof, topo, opts.force);
  profile::HostPartition part;
  std::string partition_error;
  try {
    part = profile::resolve_partition(prof, topo);
  } catch (const profile::ProfileError& e) {
    // Forced onto a host the profile was not written for: still plan what can
    // be planned, and say why the rest cannot.
    if (!opts.force) throw;
    partition_error = e.what();
  }
  // Host facts once for the whole run: every step and check reads these.
  host::Capabilities caps = host::probe_capabilities(sys, topo);
  // What the selected steps' sections ask of this host (a CAT mask it cannot
  // take) is the profile's error, refused here (plan, apply and verify alike)
  // rather than skipped when applying.
  std::vector<std::string> sections;
  for (int n : steps)
    if (const Step* st = find_step(n); st && st->section) sections.push_back(st->section->name);
  if (!sections.empty()) profile::validate_host(prof, {nullptr, &caps.l3cat}, sections);
  Session s{sys, std::move(topo),  std::move(prof), std::move(part), steps,
            {},  match.mismatches, partition_error, std::move(caps)};
  StepContext ctx{s.sys, s.profile, s.topo, s.part, partition_error, &s.caps};
  s.knobs = build_knobs(ctx, s.steps);
  return s;
}

}  // namespace epyctune::stack
