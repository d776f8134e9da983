// What the stack may write, by knob kind. The sysroot confines every access to
// the tree (lib/host/sysroot.hpp); this narrows writes inside the tree to the
// places the nine steps actually need, so that neither a forged journal
// replayed by `revert` nor a profile's path can reach /etc/shadow or delete a
// directory tree. The roots follow lib/stack/steps/*.cpp:
//   value     /sys/..., /proc/sys/..., /proc/irq/...
//   file      /etc/default/grub.d/..., /var/lib/epyctune/... (not the journal or lock)
//   dir       the same two trees, /sys/fs/resctrl/<group>, and the ancestors
//             /etc, /etc/default, /var, /var/lib (created on a bare tree)
//   msr       /dev/cpu/N/msr
//   schemata  /sys/fs/resctrl/schemata, /sys/fs/resctrl/<group>/schemata
//   cmdline   /proc/cmdline (read-only)
#pragma once

#include <string>
#include <string_view>

#include "stack/knob.hpp"

namespace epyctune::stack {

inline constexpr const char* kGrubDropinDir = "/etc/default/grub.d";
inline constexpr const char* kResctrlRoot = "/sys/fs/resctrl";

// Why `loc` may not be written, or "" when it may. A path must be absolute and
// hold no "." or ".." component, no empty component and no control character.
std::string location_problem(const KnobLocation& loc);

// Why `name` cannot be a single path component (a resctrl group name), or "".
std::string component_problem(std::string_view name);

}  // namespace epyctune::stack
