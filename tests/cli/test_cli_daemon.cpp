// The CLI and the daemon: apply, revert and status go through a control
// socket that answers beneath the sysroot and work directly when none does;
// `engine` needs the daemon. The daemon here is a control::Server in the test
// with canned replies, so what the CLI prints can only have come from it.
#include <doctest/doctest.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "cli_host.hpp"
#include "common/exit_codes.hpp"
#include "control/server.hpp"
#include "stack/applied.hpp"
#include "stack/apply.hpp"
#include "stack/revert.hpp"

using namespace epyctune;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

stack::KnobOutcome outcome(const char* step, const char* name, const char* status,
                           const char* before, const char* after) {
  stack::KnobOutcome o;
  o.step = step;
  o.name = name;
  o.path = std::string("/sys/fake/") + name;
  o.status = *stack::knob_status_from_string(status);
  o.before = before;
  o.after = after;
  return o;
}

// What the fake daemon's apply returns: a result no fixture would produce.
json canned_apply(int exit_code) {
  stack::ApplyResult r;
  r.changed = true;
  r.reboot_required = true;
  r.exit_code = exit_code;
  r.notes = {"from the fake daemon"};
  r.knobs = {outcome("bios", "fake_knob", "applied", "old-value", "new-value"),
             outcome("cpufreq", "other_knob", "unchanged", "x", "x")};
  if (exit_code != kExitOk) r.error = "fake failure";
  return stack::to_json(r);
}

json canned_revert() {
  stack::RevertResult r;
  r.had_journal = true;
  r.changed = true;
  r.knobs = {outcome("bios", "fake_knob", "restored", "new-value", "old-value")};
  return stack::to_json(r);
}

// The plan gave "big" CPUs 0-31; its threads run on 0-7 (what it runs on is
// what `engine status` shows, the plan's next to it).
json canned_instances() {
  return {{"instances", json::array({{{"name", "big"},
                                      {"state", "running"},
                                      {"pid", 4242},
                                      {"cpus", "0-31"},
                                      {"host_cpus", ""},
                                      {"url", "http://127.0.0.1:8080"},
                                      {"threads", json::array({{{"tid", 1}, {"cpus", "0-3"}},
                                                               {{"tid", 2}, {"cpus", "4-7"}}})},
                                      {"serving",
                                       {{"active_sequences", 3},
                                        {"kv_blocks_used", 120},
                                        {"kv_blocks_total", 512},
                                        {"kv_block_tokens", 16}}},
                                      {"last_error", ""}},
                                     // An engine from before the KV pool.
                                     {{"name", "old"},
                                      {"state", "running"},
                                      {"pid", 4343},
                                      {"cpus", "48-63"},
                                      {"host_cpus", "8-9"},
                                      {"url", "http://127.0.0.1:8081"},
                                      {"serving",
                                       {{"active_sequences", nullptr},
                                        {"kv_blocks_used", nullptr},
                                        {"kv_blocks_total", nullptr}}},
                                      {"last_error", ""}},
                                     {{"name", "small"},
                                      {"state", "stopped"},
                                      {"pid", nullptr},
                                      {"cpus", "32-47"},
                                      {"host_cpus", "2-3"},
                                      {"url", ""},
                                      {"last_error", "exited with 1"}}})}};
}

// A fake epyctuned at <root>/run/epyctune/epyctuned.sock.
struct FakeDaemon {
  std::mutex mu;
  std::vector<control::Request> seen;
  int apply_exit = kExitOk;
  bool forbid_apply = false;
  control::Server server;

  explicit FakeDaemon(const std::string& root)
      : server(
            [&] {
              control::ServerOptions o;
              o.path = (std::filesystem::path(root) / "run/epyctune/epyctuned.sock").string();
              return o;
            }(),
            [this](const control::Request& r, const control::Peer&) -> json {
              std::lock_guard lk(mu);
              seen.push_back(r);
              if (r.method == "apply") {
                if (forbid_apply) throw control::ProtocolError(control::code::forbidden, "no");
                return canned_apply(apply_exit);
              }
              if (r.method == "revert") return canned_revert();
              if (r.method == "status")
                return {{"version", "9.9"},
                        {"pid", 42},
                        {"profile", "fake-profile"},
                        {"applied", true},
                        {"instances", canned_instances()["instances"]}};
              return canned_instances();
            }) {
    server.start();
  }
  control::Request last() {
    std::lock_guard lk(mu);
    REQUIRE(!seen.empty());
    return seen.back();
  }
  std::size_t calls() {
    std::lock_guard lk(mu);
    return seen.size();
  }
};

// Whether the fixture's own journal holds applied knobs.
bool applied_here(const CliHost& h) {
  return stack::read_applied_state(host::Sysroot(h.dir.path())).applied;
}

}  // namespace

TEST_CASE("cli: without a daemon apply, revert and status work directly; engine refuses") {
  CliHost h("9354");
  auto apply = h.run({"apply", "--profile", "9354", "--json"});
  CHECK_MESSAGE(apply.code == kExitOk, apply.err);
  CHECK(json::parse(apply.out)["changed"] == true);
  auto st = json::parse(h.run({"status", "--json"}).out);
  CHECK(st["applied"] == true);
  CHECK_FALSE(st.contains("daemon"));
  CHECK_FALSE(has(h.run({"status"}).out, "daemon:"));
  CHECK(h.run({"revert"}).code == kExitOk);

  auto engine = h.run({"engine", "status"});
  CHECK(engine.code == kExitError);
  CHECK(has(engine.err, "epyctuned is not running (no socket at " + h.root() +
                            "/run/epyctune/epyctuned.sock)"));
}

TEST_CASE("cli: apply goes through a running daemon and prints its result as its own") {
  CliHost h("9354");
  FakeDaemon d(h.root());

  auto j = h.run({"apply", "--profile", "9354", "--steps", "1,6", "--check", "--json"});
  CHECK(j.code == kExitOk);
  CHECK(json::parse(j.out) == canned_apply(kExitOk));
  auto req = d.last();
  CHECK(req.method == "apply");
  CHECK(req.params == json{{"profile", "9354"},
                           {"steps", "1,6"},
                           {"check", true},
                           {"keep_going", false},
                           {"force", false}});
  CHECK_FALSE(applied_here(h));  // nothing was applied here

  auto text = h.run({"apply", "--profile", "9354", "--keep-going", "--force"});
  CHECK(text.code == kExitOk);
  CHECK(has(text.out, "bios:\n  applied  fake_knob  old-value -> new-value\n"));
  CHECK(has(text.out, "note: from the fake daemon"));
  CHECK(has(text.out, "changed: true, reboot required: true, 1 knob(s) already as desired"));
  CHECK(d.last().params["keep_going"] == true);
  CHECK(d.last().params["force"] == true);

  d.apply_exit = kExitFailed;  // the daemon's exit code is the CLI's
  auto failed = h.run({"apply", "--profile", "9354", "--json"});
  CHECK(failed.code == kExitFailed);
  CHECK(json::parse(failed.out)["error"] == "fake failure");
  CHECK(has(failed.err, "epyctune apply: fake failure"));

  d.forbid_apply = true;
  auto refused = h.run({"apply", "--profile", "9354"});
  CHECK(refused.code == kExitPrivilege);
  CHECK(has(refused.err, "epyctuned refused 'apply' (forbidden)"));
  CHECK_FALSE(applied_here(h));

  // --direct applies here, whatever the daemon would say.
  auto calls = d.calls();
  auto direct = h.run({"apply", "--profile", "9354", "--direct", "--json"});
  CHECK_MESSAGE(direct.code == kExitOk, direct.err);
  CHECK(json::parse(direct.out)["changed"] == true);
  CHECK(d.calls() == calls);
  CHECK(applied_here(h));
  CHECK(h.run({"revert", "--direct"}).code == kExitOk);
}

TEST_CASE("cli: revert, status and engine through the daemon") {
  CliHost h("9354");
  FakeDaemon d(h.root());

  auto rj = h.run({"revert", "--json"});
  CHECK(rj.code == kExitOk);
  CHECK(json::parse(rj.out) == canned_revert());
  auto rt = h.run({"revert"});
  CHECK(has(rt.out, "bios:\n  restored  fake_knob  new-value -> old-value\n"));
  CHECK(has(rt.out, "reverted 1 journaled knob(s)"));
  CHECK(d.last().method == "revert");

  auto sj = json::parse(h.run({"status", "--json"}).out);
  CHECK(sj["applied"] == false);  // the local part: this fixture's journal
  CHECK(sj["daemon"]["pid"] == 42);
  CHECK(sj["daemon"]["profile"] == "fake-profile");
  auto st = h.run({"status"});
  CHECK(has(st.out, "nothing applied"));
  CHECK(has(st.out, "daemon:  epyctuned 9.9 (pid 42) at " + h.root()));
  CHECK(has(st.out, "instance big: running on CPUs 0-7\n"));  // where it runs, not the plan
  CHECK(has(st.out, "instance small: stopped on CPUs 2-3\n"));
  auto direct = json::parse(h.run({"status", "--json", "--direct"}).out);
  CHECK_FALSE(direct.contains("daemon"));

  // A header, then each instance where it runs (its threads' CPUs, else the
  // host CPUs it is confined to) beside its plan's CPUs; it used to print the
  // plan's alone, with no header: "big  running  pid 4242 cpus 0-31 ...".
  // A running one's active sequences and KV blocks used/total from its
  // /health; "-" where the engine lacks them (they used to be absent).
  auto es = h.run({"engine", "status"});
  CHECK(es.code == kExitOk);
  CHECK(es.out ==
        "NAME   STATE    PID   CPUS  PLAN   THREADS  ACTIVE  KV             URL\n"
        "big    running  4242  0-7   0-31   2        3       120/512 (23%)  http://127.0.0.1:8080\n"
        "old    running  4343  8-9   48-63           -       -              http://127.0.0.1:8081\n"
        "small  stopped        2-3   32-47\n"
        "small: last error: exited with 1\n");
  auto esj = json::parse(h.run({"engine", "status", "--json"}).out);
  CHECK(esj["instances"][0]["serving"]["kv_blocks_used"] == 120);
  CHECK(d.last().method == "engine.status");
  auto stop = h.run({"engine", "stop", "--name", "big", "--json"});
  CHECK(stop.code == kExitOk);
  CHECK(json::parse(stop.out) == canned_instances());
  CHECK(d.last().method == "engine.stop");
  CHECK(d.last().params == json{{"name", "big"}});
  CHECK(h.run({"engine", "start"}).code == kExitOk);
  CHECK(d.last().method == "engine.start");
  CHECK(d.last().params == json::object());
  CHECK(h.run({"engine"}).code == kExitError);  // an action is required
}
