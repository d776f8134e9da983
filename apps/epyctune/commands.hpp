// Subcommand registration. A cmd_*.cpp file adds itself with a static
// Registrar, so adding a command never edits main.cpp.
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "control/client.hpp"
#include "stack/apply.hpp"
#include "stack/session.hpp"
#include "stack/text_report.hpp"

namespace epyctune::cli {

struct GlobalOptions {
  std::string sysroot = "/";
  std::string topology_xml;
  int verbose = 0;          // how many -v
  int exit_code = kExitOk;  // set by the command's callback
};

// stack::open_session with the global options, logging what it read.
stack::Session open_session(const GlobalOptions& g, const std::string& profile,
                            const std::string& steps, bool force);

// The daemon (epyctuned) and the CLI: apply, revert and status go through the
// daemon's control socket when one answers beneath the sysroot, and work
// directly when none does (docs/control-socket.md). Both paths take the same
// state lock inside stack::apply_knobs / revert_journal.

// <sysroot>/run/epyctune/epyctuned.sock
std::string daemon_socket(const GlobalOptions& g);
// A connection to the running epyctuned; nullopt when nothing listens there.
// A socket that exists but cannot be reached (permissions) is logged and
// treated as no daemon: the direct path is as safe, it takes the same lock.
std::optional<control::Client> connect_daemon(const GlobalOptions& g);
// apply and revert may take a while in the daemon (MSR writes, a queued
// request before them); a reply slower than this is an error.
inline constexpr int kDaemonWriteTimeoutMs = 30 * 60 * 1000;
inline constexpr int kDaemonReadTimeoutMs = 30 * 1000;
// The exit code for a daemon's error reply: forbidden is a missing
// privilege, anything else bad input or a daemon that could not run it.
int exit_code_for(const control::ProtocolError& e);
// "epyctuned refused 'apply' (forbidden): ...".
std::string describe(const control::ProtocolError& e, const std::string& method);
// One knob outcome as stack::to_json(KnobOutcome) wrote it (the daemon's
// apply and revert results), for the same text rendering as the direct path.
stack::KnobOutcome knob_outcome_from_json(const nlohmann::json& j);

// How human text is shown: per-CPU rows with -v (--verbose), colour when
// `fd` is a terminal and NO_COLOR is not set (-1: text for a file, no colour).
stack::TextOptions text_options(const GlobalOptions& g, bool changed_only, int fd = STDOUT_FILENO);

// JSON output, spelled both ways the binaries spell it: `--json` and
// `--format json` (`--format text` is the default). Either sets `json`; the
// two together are refused, so no order of them is ambiguous.
void add_json_options(CLI::App* cmd, bool& json, const std::string& help);

// Where an engine instance of the daemon's status runs: the union of its
// threads' CPUs when it has threads, else the host CPUs it is confined to,
// else its plan's CPUs ("" when the reply has none of them).
std::string instance_cpus(const nlohmann::json& instance);

using RegisterFn = void (*)(CLI::App& app, GlobalOptions& global);
std::vector<RegisterFn>& registry();

struct Registrar {
  explicit Registrar(RegisterFn fn) { registry().push_back(fn); }
};

}  // namespace epyctune::cli
