// Two instances of one model on two disjoint partitions of the fixture's
// plan, mapped onto this machine's CPUs: both answer, and no thread of one
// may run on a CPU any thread of the other may run on.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>
#include <sched.h>

#include <fstream>
#include <set>

#include "common/cpulist.hpp"
#include "daemon_harness.hpp"
#include "life_fixture.hpp"

using namespace epyctune;
using namespace epyctune::testing;

namespace {

// Every CPU any thread of `pid` may run on, from /proc/PID/task/*/status.
std::set<int> cpus_of_threads(int pid, int& threads) {
  std::set<int> out;
  threads = 0;
  for (const auto& t :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream f(t.path() / "status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        ++threads;
        for (int c : common::parse_cpulist(line.substr(line.find(':') + 1))) out.insert(c);
      }
  }
  return out;
}

int allowed_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}

}  // namespace

TEST_CASE("two instances of one model run on disjoint CPUs and both answer") {
  if (allowed_cpu_count() < 2) {
    MESSAGE("unsupported: this machine allows one CPU, two disjoint instances need two");
    return;
  }
  LifeHost h;
  const int p1 = free_port();
  int p2 = free_port();
  if (p2 == p1) p2 = p1 + 1;
  h.write_config(fmt::format(R"(profile = "{}"
steps = "cat"  # the resctrl groups the instances join

[drift]
interval_s = 0
uevents = false

[engine]
binary = "{}"
map_cpus = true
ready_timeout_s = 60

[[instance]]
name = "one"
model = "{}"
port = {}

[[instance]]
name = "two"
model = "{}"
port = {}
)",
                             kLifeProfile, ENGINE_BIN, h.model.string(), p1, h.model.string(), p2));
  DaemonProcess d({"--config", h.config.string(), "--sysroot", h.sysroot.string(), "--socket",
                   h.socket.string()},
                  h.work / "epyctuned.log", {});
  auto running = [&] {
    if (!std::filesystem::exists(h.socket)) return false;
    auto st = call(h.socket.string(), "engine.status");
    int n = 0;
    for (const auto& i : st["instances"]) n += i["state"] == "running";
    return n == 2;
  };
  REQUIRE_MESSAGE(eventually(running, 60), d.log());

  auto st = call(h.socket.string(), "status");
  REQUIRE(st["instances"].size() == 2);
  std::set<int> plan_cpus[2];
  int pids[2];
  for (int k = 0; k < 2; ++k) {
    const auto& i = st["instances"][k];
    CHECK(i["name"] == (k == 0 ? "one" : "two"));
    auto cpus = common::parse_cpulist(i["cpus"].get<std::string>());
    CHECK_FALSE(cpus.empty());
    plan_cpus[k] = {cpus.begin(), cpus.end()};
    CHECK_FALSE(i["host_cpus"].get<std::string>().empty());
    CHECK(i["numa_nodes"].is_array());
    pids[k] = i["pid"];
  }
  for (int c : plan_cpus[0]) CHECK_MESSAGE(!plan_cpus[1].count(c), "plan CPU " << c << " shared");

  for (int port : {p1, p2}) {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(30, 0);
    auto res =
        http.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 3})", "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
  }

  int t0 = 0, t1 = 0;
  auto a = cpus_of_threads(pids[0], t0);
  auto b = cpus_of_threads(pids[1], t1);
  CHECK(t0 >= 1);
  CHECK(t1 >= 1);
  for (int c : a) CHECK_MESSAGE(!b.count(c), "CPU " << c << " is allowed to threads of both");

  // A crash is restarted (after restart_backoff_ms) and counted.
  ::kill(pids[0], SIGKILL);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto i = call(h.socket.string(), "engine.status", {{"name", "one"}});
                        const auto& one = i["instances"][0];
                        return one["state"] == "running" && one["restarts"] == 1 &&
                               one["pid"] != pids[0];
                      },
                      30),
                  d.log());
  CHECK(d.log().find("instance one: engine crashed (killed by signal 9)") != std::string::npos);
  pids[0] = call(h.socket.string(), "engine.status", {{"name", "one"}})["instances"][0]["pid"];

  call(h.socket.string(), "engine.stop", {{"name", "two"}});
  st = call(h.socket.string(), "engine.status", {{"name", "two"}});
  CHECK(st["instances"][0]["state"] == "stopped");
  d.signal(SIGTERM);
  CHECK_MESSAGE(d.wait(30) == 0, d.log());
  CHECK(::kill(pids[0], 0) != 0);
}
