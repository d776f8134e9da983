// `epyctune status`, `verify` defaulting to the applied profile, and the
// progress line apply shows on a terminal.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"
#include "stack/journal.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

TEST_CASE("cli: status before, during and after an applied profile; verify defaults to it") {
  CliHost h("9354");
  auto none = h.run({"status"});
  CHECK(none.code == kExitOk);
  CHECK(has(none.out, "nothing applied"));
  CHECK(json::parse(h.run({"status", "--json"}).out)["applied"] == false);
  auto no_profile = h.run({"verify"});
  CHECK(no_profile.code == kExitError);
  CHECK(has(no_profile.err, "nothing is applied"));
  CHECK(has(no_profile.err, "--profile"));

  REQUIRE(h.run({"apply", "--profile", "9354"}).code == kExitOk);
  auto j = json::parse(h.run({"status", "--json"}).out);
  CHECK(j["applied"] == true);
  CHECK(j["profile"] == "epyc-9354");
  CHECK(j["profiles"] == json::array({"epyc-9354"}));
  host::Sysroot sys(h.dir.path());
  auto entries = stack::Journal(sys).load().entries;
  CHECK(j["knobs"] == entries.size());
  CHECK(j["steps"][0]["step"] == entries.front().step);
  int per_step = 0;
  for (const auto& s : j["steps"]) per_step += s["knobs"].get<int>();
  CHECK(per_step == static_cast<int>(entries.size()));
  CHECK(j["since"].get<std::string>().size() == 20);  // 2026-01-02T03:04:05Z
  // The fixture's /proc/cmdline cannot change: the written boot configuration waits.
  CHECK(j["reboot_pending"] == true);
  CHECK(j["reboot_pending_knobs"].size() > 0);
  auto text = h.run({"status"});
  CHECK(text.code == kExitOk);
  CHECK(has(text.out, "profile: epyc-9354"));
  CHECK(has(text.out, "reboot:  pending"));
  CHECK(has(text.out, "since:"));

  auto verify = h.run({"verify", "--format", "prometheus"});
  CHECK_MESSAGE(verify.code == kExitOk, (verify.out + verify.err));
  CHECK(has(verify.out, "epyctune_verify_ok{profile=\"epyc-9354\"} 1"));

  REQUIRE(h.run({"revert"}).code == kExitOk);
  CHECK(has(h.run({"status"}).out, "nothing applied"));
}

TEST_CASE("cli: apply shows progress on a terminal only") {
  CliHost h("9354");
  auto tty = run_cli_on_tty(EPYCTUNE_BIN, {"--sysroot", h.root(), "apply", "--profile", "9354"});
  CHECK(tty.code == kExitOk);
  CHECK(has(tty.out, "applying step 1/"));
  CHECK(has(tty.out, ": bios (1/"));
  CHECK(has(tty.out, "knobs)"));
  REQUIRE(h.run({"revert"}).code == kExitOk);
  auto piped = h.run({"apply", "--profile", "9354"});
  CHECK(piped.code == kExitOk);
  CHECK_FALSE(has(piped.err, "applying step"));
  CHECK(h.run({"revert"}).code == kExitOk);
}
