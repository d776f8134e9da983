// The daemon's small parts: uevent parsing, the ready line, the metrics text.
#include <doctest/doctest.h>

#include <string>

#include "common/version.hpp"
#include "daemon/health.hpp"
#include "daemon/metrics.hpp"
#include "daemon/uevents.hpp"

using namespace epyctune::daemon;

TEST_CASE("kernel uevents: CPU and memory hotplug matter, the rest does not") {
  using namespace std::string_literals;
  Uevent e;
  REQUIRE(
      parse_uevent("online@/devices/system/cpu/cpu7\0ACTION=online\0"
                   "DEVPATH=/devices/system/cpu/cpu7\0SUBSYSTEM=cpu\0SEQNUM=4242\0"s,
                   e));
  CHECK(e.action == "online");
  CHECK(e.devpath == "/devices/system/cpu/cpu7");
  CHECK(e.subsystem == "cpu");
  CHECK(uevent_matters(e));
  REQUIRE(parse_uevent("add@/devices/system/memory/memory42\0SUBSYSTEM=memory\0"s, e));
  CHECK(uevent_matters(e));
  REQUIRE(parse_uevent("add@/devices/pci0000:00/usb1\0SUBSYSTEM=usb\0"s, e));
  CHECK_FALSE(uevent_matters(e));
  CHECK_FALSE(parse_uevent("libudev\0\xfe\xed\xca\xfe"s, e));
  CHECK_FALSE(parse_uevent(""s, e));
  CHECK_FALSE(parse_uevent("@nothing"s, e));
}

TEST_CASE("the engine's ready line gives the address") {
  std::string host;
  int port = 0;
  CHECK(parse_ready_line("listening on http://127.0.0.1:8081", host, port));
  CHECK(host == "127.0.0.1");
  CHECK(port == 8081);
  CHECK(parse_ready_line("listening on http://[::1]:9/\r", host, port));
  CHECK(host == "::1");
  CHECK(port == 9);
  CHECK_FALSE(parse_ready_line("loading model", host, port));
  CHECK_FALSE(parse_ready_line("listening on http://h:99999", host, port));
  CHECK_FALSE(parse_ready_line("listening on http://h:80x", host, port));
}

TEST_CASE("metrics: the checklist's then the daemon's") {
  epyctune::stack::Checklist c;
  c.profile = std::string(1, 'p');  // not = "p": GCC 12 -O2 + ASan warns -Wrestrict on that assign
  c.lines.push_back(
      {"numa", "thp", "/sys/x", "never", "always", epyctune::stack::CheckResult::Fail, "", ""});
  c.failed = 1;
  DaemonCounters k;
  k.drift_events = 2;
  k.repairs = 3;
  auto text = render_metrics(&c, 1, k, {{"a\"b", true, 4}});
  CHECK(text.find("epyctune_verify_check{profile=\"p\",step=\"numa\"") != std::string::npos);
  CHECK(text.find("epyctune_verify_ok{profile=\"p\"} 0") != std::string::npos);
  CHECK(text.find("\nepyctuned_drift_events_total 2\n") != std::string::npos);
  CHECK(text.find("\nepyctuned_repairs_total 3\n") != std::string::npos);
  CHECK(text.find("\nepyctuned_drifted_knobs 1\n") != std::string::npos);
  // engine_instance, never instance: Prometheus owns that label (the scrape
  // target) and renames a clashing one to exported_instance.
  CHECK(text.find("epyctuned_instance_up{engine_instance=\"a\\\"b\"} 1") != std::string::npos);
  CHECK(text.find("epyctuned_instance_restarts_total{engine_instance=\"a\\\"b\"} 4") !=
        std::string::npos);
  CHECK(text.find("{instance=") == std::string::npos);
  CHECK(text.find(",instance=") == std::string::npos);
  // Which build wrote it: the daemon's, and the checklist's.
  const std::string version(epyctune::kVersion);
  CHECK(text.find("epyctuned_build_info{version=\"" + version + "\",compiler=\"") !=
        std::string::npos);
  CHECK(text.find("epyctune_build_info{version=\"" + version + "\",compiler=\"") !=
        std::string::npos);
  // Before the first verify: the daemon's build_info and instances, no checklist.
  auto first = render_metrics(nullptr, 0, {}, {{"main", false, 0}});
  CHECK(first.find("epyctuned_build_info{") != std::string::npos);
  CHECK(first.find("epyctuned_instance_up{engine_instance=\"main\"} 0") != std::string::npos);
  CHECK(first.find("epyctune_verify_") == std::string::npos);
}
