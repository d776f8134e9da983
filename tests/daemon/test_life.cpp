// epyctuned's whole life on a 9754 fixture, in one run: start and apply,
// socket status, an engine instance answering a completion, drift injected
// and repaired, SIGHUP reloads (a good one and a bad one), and SIGTERM with
// revert_on_stop leaving every file the plan names as it was, byte for byte.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>

#include "daemon_harness.hpp"
#include "life_fixture.hpp"
#include "stack/plan.hpp"

using namespace epyctune;
using namespace epyctune::testing;

namespace {

std::string life_config(int port, int interval_s, int queue, const LifeHost& h,
                        const std::string& extra = "") {
  return fmt::format(R"(profile = "{}"
revert_on_stop = true
metrics_textfile = "/var/lib/node-exporter/epyctune.prom"
{}
[drift]
interval_s = {}
repair = true
uevents = false

[engine]
binary = "{}"
map_cpus = true
ready_timeout_s = 60
stop_timeout_s = 10

[[instance]]
name = "main"
model = "{}"
port = {}
queue = {}
)",
                     kLifeProfile, extra, interval_s, ENGINE_BIN, h.model.string(), port, queue);
}

// The first cpufreq governor knob of the plan: a plain sysfs value to drift.
const stack::Knob& governor_knob(const stack::Session& s) {
  for (const auto& k : s.knobs)
    if (k.loc.kind == stack::KnobKind::Value &&
        k.loc.path.find("scaling_governor") != std::string::npos && k.desired)
      return k;
  FAIL("the 9754 plan has no scaling_governor knob");
  return s.knobs.front();
}

nlohmann::json instance(const std::string& socket) {
  auto st = call(socket, "status");
  REQUIRE(st["instances"].size() == 1);
  return st["instances"][0];
}

}  // namespace

TEST_CASE("the daemon's whole life on a fixture") {
  LifeHost h;
  auto session = stack::open_session({h.sysroot.string(), "", kLifeProfile, "", false});
  const auto before = snapshot_plan_files(session);
  const int port = free_port();
  h.write_config(life_config(port, 2, 4, h));
  NotifySocket notify(h.work / "notify.sock");
  DaemonProcess d({"--config", h.config.string(), "--sysroot", h.sysroot.string(), "--socket",
                   h.socket.string(), "-v"},
                  h.work / "epyctuned.log", {"NOTIFY_SOCKET=" + notify.path().string()});

  // (1) Started: READY=1 only after the profile is applied.
  REQUIRE_MESSAGE(
      eventually([&] { return notify.poll_messages(100).find("READY=1") != std::string::npos; },
                 40),
      d.log());
  CHECK(notify.poll_messages(0).find("STATUS=applying profile epyc-9754") <
        notify.poll_messages(0).find("READY=1"));
  CHECK(std::filesystem::exists(h.sysroot / "var/lib/epyctune/journal"));
  int to_change = 0;
  for (const auto& p : stack::plan_knobs(session.sys, session.knobs))
    to_change += p.status == stack::PlanStatus::Change;
  CHECK_MESSAGE(to_change == 0, "knobs not as the profile wants after the daemon's apply");

  // (2) Socket status.
  auto st = call(h.socket.string(), "status");
  CHECK(st["profile"] == kLifeProfile);
  CHECK(st["applied"] == true);
  CHECK(st["journal"]["applied"] == true);
  CHECK(st["drift"]["interval_s"] == 2);
  REQUIRE(st["instances"].size() == 1);
  CHECK(st["instances"][0]["name"] == "main");
  CHECK_FALSE(st["instances"][0]["cpus"].get<std::string>().empty());

  // (2b) apply through the socket takes `epyctune apply`'s options and
  // returns its result; only the profile the daemon keeps may be applied.
  auto ap = call(h.socket.string(), "apply",
                 {{"profile", kLifeProfile}, {"steps", "cpufreq"}, {"check", true}});
  CHECK(ap["exit_code"] == 0);
  CHECK(ap["changed"] == false);
  REQUIRE(ap["steps"].size() == 1);
  CHECK(ap["steps"][0]["step"] == "cpufreq");
  CHECK(ap["steps"][0]["knobs"].size() >= 1);
  try {
    call(h.socket.string(), "apply", {{"profile", "epyc-9354"}});
    FAIL("applying another profile through the daemon was accepted");
  } catch (const control::ProtocolError& e) {
    CHECK(e.code() == control::code::invalid_request);
    CHECK(std::string(e.what()).find("--direct") != std::string::npos);
  }
  try {
    call(h.socket.string(), "apply", {{"check", "yes"}});
    FAIL("a string for check was accepted");
  } catch (const control::ProtocolError& e) {
    CHECK(e.code() == control::code::invalid_request);
  }

  // (3) The instance serves: a real completion.
  REQUIRE_MESSAGE(eventually([&] { return instance(h.socket.string())["state"] == "running"; }, 60),
                  d.log());
  auto inst = instance(h.socket.string());
  CHECK(inst["url"] == fmt::format("http://127.0.0.1:{}", port));
  CHECK(inst["pid"].is_number());
  CHECK(inst["threads"].size() >= 1);
  const int first_pid = inst["pid"];
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto res =
      http.Post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 4})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  auto body = nlohmann::json::parse(res->body);
  REQUIRE(body["choices"].size() == 1);
  CHECK(body["choices"][0]["text"].is_string());

  // (4) Drift: a governor set behind the daemon's back is found and put back.
  const auto& gov = governor_knob(session);
  const auto gov_file = session.sys.resolve(gov.loc.path);
  const std::string wanted = read_file(gov_file);
  write_file(gov_file, "powersave\n");
  REQUIRE_MESSAGE(
      eventually([&] { return call(h.socket.string(), "status")["counters"]["drift_events"] >= 1; },
                 15),
      d.log());
  CHECK(eventually([&] { return read_file(gov_file) == wanted; }, 10));
  st = call(h.socket.string(), "status");
  CHECK(st["counters"]["repairs"] >= 1);
  CHECK(d.log().find("drift (interval): cpufreq") != std::string::npos);
  const auto prom = read_file(h.sysroot / "var/lib/node-exporter/epyctune.prom");
  CHECK(prom.find("epyctune_verify_ok{profile=\"epyc-9754\"} ") != std::string::npos);
  CHECK(prom.find("\nepyctuned_drift_events_total ") != std::string::npos);
  CHECK(prom.find("epyctuned_drift_events_total 0\n") == std::string::npos);
  CHECK(prom.find("epyctuned_instance_up{engine_instance=\"main\"} 1") != std::string::npos);
  // The repair is journaled: revert below restores the original governor.

  // (5) SIGHUP: a good config takes effect (interval 2 -> 3, queue 4 -> 8
  // restarts the instance), a bad one is refused and changes nothing.
  h.write_config(life_config(port, 3, 8, h));
  d.signal(SIGHUP);
  REQUIRE_MESSAGE(
      eventually([&] { return call(h.socket.string(), "status")["counters"]["reloads"] == 1; }, 20),
      d.log());
  CHECK(call(h.socket.string(), "status")["drift"]["interval_s"] == 3);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto i = instance(h.socket.string());
                        return i["state"] == "running" && i["pid"] != first_pid;
                      },
                      60),
                  d.log());
  const int second_pid = instance(h.socket.string())["pid"];
  h.write_config(life_config(port, 3, 8, h, "revert_on_sotp = false"));
  d.signal(SIGHUP);
  REQUIRE_MESSAGE(
      eventually(
          [&] { return call(h.socket.string(), "status")["counters"]["reload_failures"] == 1; },
          20),
      d.log());
  CHECK(d.log().find("unknown key 'revert_on_sotp'") != std::string::npos);
  try {
    call(h.socket.string(), "reload");
    FAIL("a bad config was taken through the socket");
  } catch (const control::ProtocolError& e) {
    CHECK(e.code() == "failed");
    CHECK(std::string(e.what()).find(h.config.string() + ":4: unknown key 'revert_on_sotp'") !=
          std::string::npos);
  }
  CHECK(d.log().find("keeping the running configuration") != std::string::npos);
  st = call(h.socket.string(), "status");
  CHECK(st["drift"]["interval_s"] == 3);
  CHECK(st["revert_on_stop"] == true);
  CHECK(st["instances"][0]["pid"] == second_pid);
  CHECK(d.alive());

  // (6) SIGTERM: the instance stops, the profile is reverted byte for byte.
  d.signal(SIGTERM);
  CHECK_MESSAGE(d.wait(30) == 0, d.log());
  CHECK(::kill(second_pid, 0) != 0);
  CHECK(notify.poll_messages(100).find("STOPPING=1") != std::string::npos);
  const auto after = snapshot_plan_files(session);
  CHECK_MESSAGE(diff_snapshots(before, after).empty(), diff_snapshots(before, after));
  CHECK_FALSE(std::filesystem::exists(h.socket));
}

TEST_CASE("a bad config stops the daemon at start, naming the file and line") {
  TempDir t;
  const auto config = t.path() / "epyctune.toml";
  write_file(config, "profile = \"epyc-9754\"\n[drift]\nintervall_s = 5\n");
  DaemonProcess d({"--config", config.string(), "--sysroot", t.str(), "--socket",
                   (t.path() / "s.sock").string()},
                  t.path() / "log", {});
  CHECK(d.wait(20) == 1);
  CHECK(d.log().find(config.string() + ":3: [drift] unknown key 'intervall_s'") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.path() / "s.sock"));
}
