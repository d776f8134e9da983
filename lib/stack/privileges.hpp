// What a live host needs before the stack writes anything: root, plus
// CAP_SYS_RAWIO for /dev/cpu/N/msr and CAP_SYS_ADMIN for mounting resctrl.
// A --sysroot tree needs only write access to its files, so nothing is checked
// there, unless a test pretends the process is unprivileged (below).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/sysroot.hpp"

namespace epyctune::stack {

// Each missing privilege with what needs it, e.g.
// "CAP_SYS_RAWIO (prefetch: MSR writes through /dev/cpu/N/msr)". Empty = go.
// `needed` maps a capability name to what needs it; `root_for` says what
// root is needed for (default: "sysfs, procfs and /etc writes").
std::vector<std::string> missing_privileges(
    const host::Sysroot& sys, const std::vector<std::pair<std::string, std::string>>& needed,
    const std::string& root_for = "");

// What the process may do: root, and its effective capabilities (CapEff bits).
struct ProcessPrivileges {
  bool root = false;
  uint64_t capabilities = 0;
};

// Test hook; the shipped tools install none (the tests' build of the CLI does,
// from EPYCTUNE_TEST_UNPRIVILEGED: tests run as root, and a chmod does not
// stop root). While one is installed, its privileges are the process's, and
// a --sysroot tree is checked as the live host would be: the privilege check
// runs, and a host file only its owner may read (a 0600 /dev/cpu/N/msr) reads
// as EACCES, as it does for a user who is not root. nullptr removes it.
void set_privileges_source(std::function<ProcessPrivileges()> source);

// Throws host::HostError(EACCES) where an installed source says the process
// is not root and `host_path` exists with no read permission for others.
// Does nothing without a source: the kernel decides.
void check_pretended_read(const host::Sysroot& sys, const std::string& host_path);

}  // namespace epyctune::stack
