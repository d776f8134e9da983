// What the daemon asks of the system around it: the service manager
// (sd_notify) and the two host facilities it shares with the CLI.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace epyctune::daemon {

// sd_notify(3) "READY=1", "STATUS=...", "STOPPING=1", "RELOADING=1"; a
// no-op without NOTIFY_SOCKET (not started by systemd) or without libsystemd.
void notify(const std::string& state);

// The two below forward to lib/host/shutdown.hpp and lib/common/atomic_file.hpp;
// they exist so the daemon's tests could swap them, and hold no logic.
bool system_shutting_down();
void write_atomic(const std::filesystem::path& path, std::string_view content, mode_t mode);

}  // namespace epyctune::daemon
