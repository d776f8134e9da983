#include <doctest/doctest.h>

#include <optional>
#include <stdexcept>

#include "host/shutdown.hpp"

using epyctune::host::is_shutting_down;
using epyctune::host::ManagerState;
using epyctune::host::system_shutting_down;

TEST_CASE("is_shutting_down: the manager's state decides") {
  CHECK(is_shutting_down({"stopping", {}}));
  CHECK_FALSE(is_shutting_down({"running", {}}));
  CHECK_FALSE(is_shutting_down({"degraded", {}}));
  CHECK_FALSE(is_shutting_down({"starting", {}}));
  CHECK_FALSE(is_shutting_down({"", {}}));
}

TEST_CASE("is_shutting_down: a queued job that ends the system counts") {
  for (const char* target : {"shutdown.target", "reboot.target", "halt.target", "poweroff.target",
                             "kexec.target", "soft-reboot.target"}) {
    CAPTURE(target);
    CHECK(is_shutting_down({"running", {{target, "start"}}}));
    CHECK(is_shutting_down({"running", {{"epyctune-apply.service", "stop"}, {target, "start"}}}));
  }
  // Stopping an ordinary unit is what `systemctl stop` does: not a shutdown.
  CHECK_FALSE(is_shutting_down({"running", {{"epyctune-apply.service", "stop"}}}));
  CHECK_FALSE(is_shutting_down({"running", {{"multi-user.target", "start"}}}));
  // Only starting an ending target ends the system.
  CHECK_FALSE(is_shutting_down({"running", {{"reboot.target", "stop"}}}));
  CHECK_FALSE(is_shutting_down({"running", {{"reboot.target.wants", "start"}}}));
}

TEST_CASE("system_shutting_down: no manager or an error means not shutting down") {
  CHECK_FALSE(system_shutting_down([] { return std::optional<ManagerState>{}; }));
  CHECK_FALSE(system_shutting_down(
      []() -> std::optional<ManagerState> { throw std::runtime_error("bus gone"); }));
  CHECK(system_shutting_down([] { return std::optional<ManagerState>{{"stopping", {}}}; }));
  CHECK(system_shutting_down([] {
    return std::optional<ManagerState>{{"running", {{"poweroff.target", "start"}}}};
  }));
  CHECK_FALSE(system_shutting_down([] { return std::optional<ManagerState>{{"running", {}}}; }));
}

TEST_CASE("read_manager_state answers without throwing wherever it runs") {
  // Here it may be a container without systemd (nullopt) or a booted system
  // (a state); either way it must not throw or hang.
  auto state = epyctune::host::read_manager_state();
  if (state) CHECK(!state->system_state.empty());
}

TEST_CASE("system_shutting_down(): asks the installed source, PID 1 without one") {
  int asked = 0;
  epyctune::host::set_manager_state_source([&asked] {
    ++asked;
    return std::optional<ManagerState>{{"stopping", {}}};
  });
  CHECK(system_shutting_down());
  CHECK(asked == 1);
  // An empty source puts read_manager_state back: ours is not asked again.
  epyctune::host::set_manager_state_source({});
  system_shutting_down();
  CHECK(asked == 1);
}
