// plan = for each knob: current value, desired value, and what apply would do.
// Read-only: plan never writes, so it is safe on a live host without root.
#pragma once

#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

enum class PlanStatus {
  Unchanged,    // already as desired
  Change,       // apply writes it
  Unsupported,  // cannot be read or written on this host: reason says why
  Manual,       // read-only and wrong: an operator must act (BIOS, irqbalance)
  Pending,      // read-only, fixed by a knob that takes effect at next boot
  Info,         // not observable from the OS at all (reason says where to look)
};

std::string to_string(PlanStatus s);

struct KnobPlan {
  Knob knob;
  KnobValue current;
  PlanStatus status = PlanStatus::Unchanged;
  std::string reason;
  // Non-zero when reading the current value failed (EIO, EACCES, EISDIR...):
  // status is Unsupported, but apply and verify treat it as a failure, never
  // as a knob to skip. `read_error` names the operation, path and cause.
  int read_errno = 0;
  std::string read_error;

  std::string desired_display() const;
};

std::vector<KnobPlan> plan_knobs(const host::Sysroot& sys, const std::vector<Knob>& knobs);

// Plans one knob against the host as it is now (apply re-plans right before
// each write, since an earlier knob may have changed this one's surroundings).
KnobPlan plan_knob(const host::Sysroot& sys, const Knob& knob);

}  // namespace epyctune::stack
