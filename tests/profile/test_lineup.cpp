// `detect` on the current lineup: each new fixture machine gets its built-in,
// and a machine without one gets the exact `profile generate` command.
#include <doctest/doctest.h>

#include "fixture/fixture_cache.hpp"
#include "profile/detect.hpp"
#include "profile/generate.hpp"

using namespace epyctune;
using epyctune::testing::cached_fixture;

namespace {

profile::DetectReport detect_on(const std::string& machine, int nps = 1) {
  fixture::FixtureOptions o;
  o.machine = machine;
  o.nps = nps;
  o.smt = false;
  return profile::run_detect(host::Sysroot(cached_fixture(o)), {});
}

}  // namespace

TEST_CASE("detect recommends each lineup machine's own built-in, at every NPS") {
  const std::pair<const char*, const char*> lineup[] = {
      {"9655", "epyc-9655"}, {"9755", "epyc-9755"},       {"9965", "epyc-9965"},
      {"9654", "epyc-9654"}, {"9654-2s", "epyc-9654-2s"}, {"7763-2s", "epyc-7763-2s"},
  };
  for (auto [machine, expect] : lineup) {
    CAPTURE(machine);
    auto r = detect_on(machine);
    CHECK(r.recommended == expect);
    CHECK(r.generate_command.empty());
    int fitting = 0;
    for (const auto& f : r.fits) fitting += f.match.matches;
    CHECK(fitting == 1);  // 9654 one socket and two sockets do not both fit
    CHECK(profile::detect_to_json(r)["recommendation"]["generate_command"].is_null());
  }
  CHECK(detect_on("9654", 4).recommended == "epyc-9654");
  CHECK(detect_on("9965", 2).recommended == "epyc-9965");
}

TEST_CASE("detect on a host without a built-in prints the generate command") {
  auto r = detect_on("7451-2s", 4);
  CHECK(r.recommended.empty());
  auto root = cached_fixture([] {
    fixture::FixtureOptions o;
    o.machine = "7451-2s";
    o.nps = 4;
    o.smt = false;
    return o;
  }());
  std::string cmd = "epyctune profile generate --sysroot " + root.string() + " -o " +
                    root.string() + "/etc/epyctune/profiles/epyc-7451-2s-generated.toml";
  CHECK(r.generate_command == cmd);
  CHECK(r.note.find(cmd) != std::string::npos);
  CHECK(r.note.find("epyctune plan --sysroot " + root.string() +
                    " --profile epyc-7451-2s-generated") != std::string::npos);
  CHECK(profile::detect_to_json(r)["recommendation"]["generate_command"] == cmd);
  CHECK(profile::detect_to_text(r).find(cmd) != std::string::npos);
}

TEST_CASE("detect does not offer generation where it cannot help") {
  host::DiscoverOptions opt;
  opt.topology_xml = std::string(EPYCTUNE_TEST_DATA) + "/topology/Intel-Skylake-2xXeon6140.xml";
  auto r = profile::run_detect(host::Sysroot("/nonexistent-root"), opt);
  CHECK(r.recommended.empty());
  CHECK(r.generate_command.empty());
  CHECK(r.note.find("cannot write one either") != std::string::npos);
  CHECK(r.note.find("AMD EPYC hosts only") != std::string::npos);
  CHECK(profile::detect_to_json(r)["recommendation"]["generate_command"].is_null());
  // A topology XML gets its file back, quoted for the shell.
  opt.topology_xml = std::string(EPYCTUNE_TEST_DATA) + "/topology/AMD-17h-Zen-2xEpyc-7451.xml";
  auto naples = profile::run_detect(host::Sysroot("/nonexistent-root"), opt);
  CHECK(naples.generate_command == "epyctune profile generate --topology " + opt.topology_xml +
                                       " -o epyc-7451-2s-generated.toml");
  CHECK(naples.note.find("epyctune plan --topology " + opt.topology_xml +
                         " --profile ./epyc-7451-2s-generated.toml") != std::string::npos);
}
