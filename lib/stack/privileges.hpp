// What a live host needs before the stack writes anything: root, plus
// CAP_SYS_RAWIO for /dev/cpu/N/msr and CAP_SYS_ADMIN for mounting resctrl.
// A --sysroot tree needs only write access to its files, so nothing is checked.
#pragma once

#include <string>
#include <vector>

#include "host/sysroot.hpp"

namespace epyctune::stack {

// Each missing privilege with what needs it, e.g.
// "CAP_SYS_RAWIO (prefetch: MSR writes through /dev/cpu/N/msr)". Empty = go.
// `needed` maps a capability name to what needs it.
std::vector<std::string> missing_privileges(
    const host::Sysroot& sys, const std::vector<std::pair<std::string, std::string>>& needed);

}  // namespace epyctune::stack
