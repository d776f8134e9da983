// Issue 33, runs without root. verify as a monitoring agent (no root) counted
// every refused read as drift (126 "failed" checks, exit 2) and apply printed
// hundreds of "Permission denied" lines, "changed: false" and exit 2. Now a
// check that needs root says so and exits 4, and apply refuses before its
// first write, naming what needs root. The tests run as root, so the tests'
// build of the CLI pretends otherwise: EPYCTUNE_TEST_UNPRIVILEGED=1 (no root,
// no capability; a file others may not read, the fixture's 0600 MSRs, reads
// as EACCES), see tests/cli_hooks/hooked_main.cpp.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

const std::string kUnprivileged = "EPYCTUNE_TEST_UNPRIVILEGED=1";

CliRun unprivileged(const CliHost& h, std::vector<std::string> args) {
  args.insert(args.begin(), {"--sysroot", h.root()});
  return run_cli(EPYCTUNE_HOOKED_BIN, args, kUnprivileged);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("unprivileged: apply refuses before its first write, naming what needs root") {
  CliHost h("9754");
  const auto governor = h.dir.path() / "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor";
  const std::string before = read_file(governor);
  auto r = unprivileged(h, {"apply", "--profile", "9754"});
  CHECK(r.code == kExitPrivilege);  // was 2, after the writes had failed
  CHECK(has(r.err, "epyctune apply: not applying, missing: root (writing 181 knob(s) of steps"));
  CHECK(has(r.err, "reading 126 knob(s) of steps prefetch"));
  CHECK(has(r.err, "CAP_SYS_RAWIO (prefetch: /dev/cpu/"));
  CHECK_FALSE(has(r.out + r.err, "Permission denied"));
  CHECK_FALSE(has(r.out, "changed: false"));
  CHECK(r.out.empty());
  // Nothing was written: no journal, no knob.
  CHECK_FALSE(std::filesystem::exists(h.dir.path() / "var/lib/epyctune/journal"));
  CHECK(read_file(governor) == before);
  auto j = unprivileged(h, {"apply", "--profile", "9754", "--json"});
  CHECK(j.code == kExitPrivilege);
  CHECK(json::parse(j.out)["exit_code"] == kExitPrivilege);

  // A dry run needs no root to write, only to read the MSRs: named, exit 4.
  auto check = unprivileged(h, {"apply", "--profile", "9754", "--check"});
  CHECK(check.code == kExitPrivilege);
  CHECK(has(check.err, "missing: root (reading 126 knob(s) of steps prefetch)"));
  CHECK(has(check.out, "would-apply"));
  // Without the hook (root, as the tests run) the same apply goes through.
  CHECK(h.run({"apply", "--profile", "9754"}).code == kExitOk);
  auto revert = unprivileged(h, {"revert", "--direct"});
  CHECK(revert.code == kExitPrivilege);
  CHECK(has(revert.err, "not reverting, missing: root (reading the journal"));
  CHECK(std::filesystem::exists(h.dir.path() / "var/lib/epyctune/journal"));
}

TEST_CASE("unprivileged: verify reports checks that need root as such, never as drift") {
  CliHost h("9754");
  // Drift is drift either way: before apply, the same checks fail as with root.
  auto root_json = json::parse(h.run({"verify", "--profile", "9754", "--json"}).out);
  auto drift = unprivileged(h, {"verify", "--profile", "9754", "--json"});
  CHECK(drift.code == kExitFailed);
  auto drift_json = json::parse(drift.out);
  CHECK(drift_json["failed"] == root_json["failed"]);
  CHECK(drift_json["needs_root"] == 126);

  REQUIRE(h.run({"apply", "--profile", "9754"}).code == kExitOk);
  REQUIRE(h.run({"verify", "--profile", "9754"}).code == kExitOk);
  // What a monitoring agent without root gets on a tuned host: no failure.
  auto text = unprivileged(h, {"verify", "--profile", "9754"});
  CHECK(text.code == kExitPrivilege);  // was 2, with 126 failed checks
  CHECK_FALSE(has(text.out, "[FAIL]"));
  CHECK(has(text.out, "[root]  prefetch   CPUs 2-127 PrefetchControl"));
  CHECK(has(text.out, "INCOMPLETE: "));
  CHECK(has(text.out, " 0 failed, "));
  CHECK(has(text.out,
            "126 check(s) need root, not counted as drift: prefetch/CPUs 2-127 PrefetchControl"));
  auto j = unprivileged(h, {"verify", "--profile", "9754", "--json"});
  CHECK(j.code == kExitPrivilege);
  auto v = json::parse(j.out);
  CHECK(v["failed"] == 0);
  CHECK(v["ok"] == true);
  CHECK(v["needs_root"] == 126);
  int root_checks = 0;
  for (const auto& c : v["checks"])
    if (c["reason"].get<std::string>().starts_with("needs root")) {
      ++root_checks;
      CHECK(c["result"] == "skip");
      CHECK(c["path"].get<std::string>().starts_with("/dev/cpu/"));
    }
  CHECK(root_checks == 126);
  auto prom = unprivileged(h, {"verify", "--profile", "9754", "--format", "prometheus"});
  CHECK(prom.code == kExitPrivilege);
  CHECK(has(prom.err, "126 check(s) need root"));
  CHECK(has(prom.out, "epyctune_verify_checks{profile=\"epyc-9754\",result=\"fail\"} 0"));
}
