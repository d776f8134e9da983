// SIGINT/SIGTERM as a flag: long-running commands (bench) stop at the next
// safe point and revert, instead of dying with the host half-tuned.
#pragma once

namespace epyctune::bench {

// Installs handlers without SA_RESTART, so a blocking wait returns EINTR.
void install_interrupt_handlers();
bool interrupted();
int interrupt_signal();  // the signal that arrived (0 = none)

}  // namespace epyctune::bench
