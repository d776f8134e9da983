// What the human text of plan, apply, verify and revert share: a many-CPU
// host has one knob per CPU (governor, PrefetchControl, IRQ affinity), so
// rows that differ only by the number in their name and agree on everything
// shown fold into one row with the numbers as a list ("CPUs 2-63,66-127
// governor"), as cpupower and numactl print them; values show on one line;
// and the last line says what to run when the boot configuration changed.
// JSON never folds: scripts get every knob.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::stack {

struct TextOptions {
  bool per_cpu = false;       // --verbose: one row per knob, nothing folded
  bool changed_only = false;  // only the rows that change (and failures)
  bool colour = false;        // ANSI colour (a terminal without NO_COLOR)
};

// A value on one line of a table: a multi-line value (a file's text) as its
// first line and "(+N lines)", control characters escaped, cut at `max`.
std::string one_line(std::string_view value, size_t max = 60);

// One row to fold: the knob's name and everything else its row shows.
struct FoldInput {
  std::string name;
  std::string shown;
};
// Rows in the order of their first member; `members` index the input.
struct FoldedRow {
  std::string name;  // "CPUs 2-127 governor", "IRQs 0,4,8-9 affinity", or the name
  std::vector<size_t> members;
};
// Rows whose names are equal but for one number, with equal `shown`, become
// one; every other row stays as it is. `fold` false: one row per input.
std::vector<FoldedRow> fold_rows(const std::vector<FoldInput>& rows, bool fold);

// A path of the GRUB drop-in directory: writing or removing it takes
// update-grub and a reboot.
bool is_grub_dropin(std::string_view path);
// "Next: run update-grub, then reboot (...)" for a written or removed GRUB
// drop-in, "Next: reboot (...)" for another boot-time change, "" for none.
std::string boot_next_step(bool grub_changed, bool reboot, const std::string& why);

}  // namespace epyctune::stack
