// The daemon's textfile follows its instances: written when one comes up and
// when one goes down, not only after the next verify (which, with the
// default interval, is five minutes later; here there is none at all).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "common/version.hpp"
#include "daemon_harness.hpp"
#include "life_fixture.hpp"

using namespace epyctune;
using namespace epyctune::testing;

TEST_CASE("the metrics textfile says an instance is up when it is, and down when it stops") {
  LifeHost h;
  const int port = free_port();
  h.write_config(fmt::format(R"(profile = "{}"
steps = "cat"
metrics_textfile = "/var/lib/node-exporter/epyctune.prom"

[drift]
interval_s = 0
uevents = false

[engine]
binary = "{}"
map_cpus = true
ready_timeout_s = 120

[[instance]]
name = "main"
model = "{}"
port = {}
)",
                             kLifeProfile, ENGINE_BIN, h.model.string(), port));
  DaemonProcess d({"--config", h.config.string(), "--sysroot", h.sysroot.string(), "--socket",
                   h.socket.string(), "-v"},
                  h.work / "epyctuned.log", {});
  const auto prom = h.sysroot / "var/lib/node-exporter/epyctune.prom";
  auto text = [&] { return std::filesystem::exists(prom) ? read_file(prom) : std::string(); };
  const std::string up = "epyctuned_instance_up{engine_instance=\"main\"} 1\n";
  const std::string down = "epyctuned_instance_up{engine_instance=\"main\"} 0\n";

  // The start's verify writes it while the engine still loads (down), and
  // the instance may be up already when it is first read.
  REQUIRE_MESSAGE(
      eventually([&] { return text().find("epyctuned_instance_up{") != std::string::npos; }, 60),
      d.log());
  CHECK(text().find("epyctuned_build_info{version=\"" + std::string(kVersion) + "\"") !=
        std::string::npos);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto st = call(h.socket.string(), "engine.status", {{"name", "main"}});
                        return st["instances"][0]["state"] == "running";
                      },
                      120),
                  d.log());
  // No verify runs again (interval_s = 0): only the instance's coming up
  // can have rewritten the file. It used to say 0 until the next verify.
  CHECK_MESSAGE(eventually([&] { return text().find(up) != std::string::npos; }, 10),
                (text() + d.log()));
  CHECK(d.log().find("verify (interval)") == std::string::npos);

  call(h.socket.string(), "engine.stop", {{"name", "main"}});
  CHECK_MESSAGE(eventually([&] { return text().find(down) != std::string::npos; }, 10),
                (text() + d.log()));
  d.signal(SIGTERM);
  CHECK_MESSAGE(d.wait(30) == 0, d.log());
}
