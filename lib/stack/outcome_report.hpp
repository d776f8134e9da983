// `epyctune apply` and `revert` as text: per step, every knob that did
// something (unchanged ones are counted, not listed), per-CPU knobs folded
// like the plan's, values on one line, and what to run when the boot
// configuration changed. The JSON (stack::to_json) lists every knob.
#pragma once

#include <string>
#include <vector>

#include "stack/apply.hpp"
#include "stack/text_report.hpp"

namespace epyctune::stack {

std::string outcomes_to_text(const std::vector<KnobOutcome>& knobs, const TextOptions& o);

// "Next: run update-grub, then reboot (...)" when these outcomes wrote or
// removed the GRUB drop-in or another boot-time setting; "" otherwise.
std::string outcomes_next_step(const std::vector<KnobOutcome>& knobs, bool reverting);

}  // namespace epyctune::stack
