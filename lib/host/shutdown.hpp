// Whether the machine is going down. A unit's ExecStop runs both when an
// operator stops it and when the system shuts down; tuned-style "keep the
// state across shutdown" needs to tell the two apart, and only the service
// manager knows.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::host {

// One entry of org.freedesktop.systemd1.Manager.ListJobs.
struct QueuedJob {
  std::string unit;  // "reboot.target"
  std::string type;  // "start"
};

// What the manager said: Manager.SystemState and the queued jobs.
struct ManagerState {
  std::string system_state;  // "running", "degraded", "stopping", ...
  std::vector<QueuedJob> jobs;
};

// The decision alone: the manager is stopping, or a job to start one of the
// targets that end the system (shutdown, reboot, halt, poweroff, kexec,
// soft-reboot) is queued.
bool is_shutting_down(const ManagerState& state);

// Reads the manager's state; nullopt when there is no manager to ask (not
// booted with systemd, no bus, an error), with the reason at debug level.
using ManagerStateSource = std::function<std::optional<ManagerState>()>;

// Asks PID 1 over the system bus with sd-bus.
std::optional<ManagerState> read_manager_state();

// The source system_shutting_down() asks when given none. The shipped tools
// never set it, so they ask PID 1 (read_manager_state). The end-to-end tests
// of `revert --unless-shutdown` cannot shut a system down: their build of the
// CLI (tests/cli_hooks) installs a source that names the state instead. An
// empty source puts read_manager_state back.
void set_manager_state_source(ManagerStateSource source);

// True when systemd says the system is going down; false when not under
// systemd or when it cannot be asked (a revert then goes ahead, as it would
// without the check).
bool system_shutting_down(const ManagerStateSource& source);
// The same, asking the installed source (read_manager_state by default).
bool system_shutting_down();

}  // namespace epyctune::host
