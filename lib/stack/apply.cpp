#include "stack/apply.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "stack/journal.hpp"
#include "stack/plan.hpp"
#include "stack/privileges.hpp"
#include "stack/state_lock.hpp"

namespace epyctune::stack {

using nlohmann::json;

namespace {

std::string errno_name(int e) {
  switch (e) {
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case EIO:
      return "EIO";
    case EINVAL:
      return "EINVAL";
    case EBUSY:
      return "EBUSY";
    case ENOENT:
      return "ENOENT";
    case EISDIR:
      return "EISDIR";
    case ENOTDIR:
      return "ENOTDIR";
    case ENOSPC:
      return "ENOSPC";
    case EROFS:
      return "EROFS";
    case EEXIST:
      return "EEXIST";
    case ENOTEMPTY:
      return "ENOTEMPTY";
    case ENXIO:
      return "ENXIO";
    case EAGAIN:
      return "EAGAIN";
    default:
      return fmt::format("errno {}", e);
  }
}

KnobOutcome outcome_of(const KnobPlan& p) {
  KnobOutcome o;
  o.step = p.knob.step;
  o.name = p.knob.name;
  o.key = p.knob.loc.key();
  o.path = p.knob.loc.path;
  o.before = p.current.display();
  o.after = o.before;
  o.reason = p.reason;
  return o;
}

struct Applied {
  size_t outcome_index;
  KnobLocation loc;
  KnobValue before;
};

// Puts back, newest first, what this run changed. Returns problems.
std::vector<std::string> roll_back(const host::Sysroot& sys, std::vector<Applied>& applied,
                                   std::vector<KnobOutcome>& outcomes) {
  std::vector<std::string> problems;
  for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
    auto& o = outcomes[it->outcome_index];
    try {
      restore_knob(sys, it->loc, it->before);
      o.status = "rolled-back";
      o.after = read_location(sys, it->loc).display();
    } catch (const std::exception& e) {
      problems.push_back(
          fmt::format("rollback of {}/{} failed: {} (its original is in the "
                      "journal: run `epyctune revert`)",
                      o.step, o.name, e.what()));
    }
  }
  return problems;
}

}  // namespace

ApplyResult apply_knobs(const host::Sysroot& sys, const std::vector<Knob>& knobs,
                        const ApplyOptions& opts) {
  ApplyResult r;
  auto plans = plan_knobs(sys, knobs);

  if (opts.check) {
    for (const auto& p : plans) {
      auto o = outcome_of(p);
      o.status = p.status == PlanStatus::Change      ? "would-apply"
                 : p.status == PlanStatus::Unchanged ? "unchanged"
                                                     : "skipped";
      if (p.status == PlanStatus::Change) {
        o.after = p.desired_display();
        r.changed = true;
      }
      o.reboot_required = (p.status == PlanStatus::Change && p.knob.reboot_required) ||
                          p.status == PlanStatus::Pending;
      r.reboot_required |= o.reboot_required;
      r.knobs.push_back(std::move(o));
    }
    return r;
  }

  // Say every missing privilege before touching anything.
  std::vector<std::pair<std::string, std::string>> caps;
  for (const auto& p : plans)
    if (p.status == PlanStatus::Change)
      for (const auto& c : p.knob.capabilities)
        caps.emplace_back(c, fmt::format("{}: {}", p.knob.step, p.knob.loc.path));
  auto missing = missing_privileges(sys, caps);
  if (!missing.empty()) {
    r.exit_code = kExitPrivilege;
    r.error = "not applying, missing: ";
    for (size_t i = 0; i < missing.size(); ++i) r.error += (i ? "; " : "") + missing[i];
    return r;
  }

  bool any_change = false;
  for (const auto& p : plans) any_change |= p.status == PlanStatus::Change;

  std::optional<StateLock> lock;
  Journal journal(sys);
  std::set<std::string> journaled;
  if (any_change) {
    auto created = ensure_state_dir(sys);
    try {
      lock.emplace(sys);
    } catch (const LockHeldError& e) {
      r.exit_code = kExitLocked;
      r.error = e.what();
      return r;
    }
    if (!lock->recovered().empty()) r.notes.push_back(lock->recovered());
    // Read the journal before any write: an unreadable journal stops the run.
    auto contents = journal.load();
    for (const auto& e : contents.entries) journaled.insert(e.loc.key());
    journal.ensure_header(created);
  }

  std::vector<Applied> applied;
  bool stopped = false;
  for (const auto& planned : plans) {
    if (opts.on_progress)
      opts.on_progress({static_cast<size_t>(&planned - plans.data()), plans.size(), &planned.knob});
    if (stopped) {
      auto o = outcome_of(planned);
      o.status = "skipped";
      o.reason = "not attempted: an earlier knob failed";
      r.knobs.push_back(std::move(o));
      continue;
    }
    // Re-plan right before writing: an earlier knob may have changed this one.
    KnobPlan p = planned.status == PlanStatus::Change ? plan_knob(sys, planned.knob) : planned;
    if (planned.status == PlanStatus::Pending) {
      p.status = PlanStatus::Pending;
      p.reason = planned.reason;
    }
    auto o = outcome_of(p);
    switch (p.status) {
      case PlanStatus::Unchanged:
        o.status = "unchanged";
        break;
      case PlanStatus::Pending:
        o.status = "skipped";
        o.reboot_required = true;
        break;
      case PlanStatus::Unsupported:
      case PlanStatus::Manual:
      case PlanStatus::Info:
        o.status = "skipped";
        break;
      case PlanStatus::Change:
        break;
    }
    if (p.status != PlanStatus::Change) {
      r.reboot_required |= o.reboot_required;
      r.knobs.push_back(std::move(o));
      continue;
    }
    const auto& k = p.knob;
    try {
      if (!journaled.count(k.loc.key())) {
        journal.append({0, k.step, k.name, opts.profile, k.loc, p.current});
        journaled.insert(k.loc.key());
      }
      write_knob(sys, k.loc, *k.desired);
    } catch (const host::HostError& e) {
      if (e.err() == EIO && !k.eio_means.empty()) {
        o.status = "skipped";
        o.reason = k.eio_means;
        r.knobs.push_back(std::move(o));
        continue;
      }
      o.status = "failed";
      o.reason = fmt::format("{} {}: {} ({})", e.op(), e.path(), std::strerror(e.err()),
                             errno_name(e.err()));
      r.error = fmt::format("{}/{} failed: {}", k.step, k.name, o.reason);
      r.exit_code = kExitFailed;
      r.knobs.push_back(std::move(o));
      if (!opts.keep_going) {
        auto problems = roll_back(sys, applied, r.knobs);
        r.notes.insert(r.notes.end(), problems.begin(), problems.end());
        r.rolled_back = true;
        stopped = true;
      }
      continue;
    }
    r.changed = true;
    applied.push_back({r.knobs.size(), k.loc, p.current});
    KnobValue after;
    try {
      after = read_location(sys, k.loc);
    } catch (const host::HostError& e) {
      after.value = fmt::format("(unreadable: {})", e.what());
    }
    o.after = after.display();
    o.reboot_required = k.reboot_required;
    r.reboot_required |= k.reboot_required;
    if (knob_matches(k.loc, after, *k.desired)) {
      o.status = "applied";
      o.reason.clear();
    } else {
      // Never silent: the kernel took the write but holds something else.
      o.status = "mismatch";
      o.reason = fmt::format("wrote {}, read back {}", p.desired_display(), after.display());
      if (!k.mismatch_hint.empty()) o.reason += ": " + k.mismatch_hint;
      r.exit_code = kExitFailed;
      if (r.error.empty()) r.error = fmt::format("{}/{}: {}", k.step, k.name, o.reason);
    }
    r.knobs.push_back(std::move(o));
  }
  if (r.rolled_back) r.changed = false;
  return r;
}

json to_json(const KnobOutcome& o) {
  return json{{"step", o.step},     {"knob", o.name},
              {"path", o.path},     {"status", o.status},
              {"before", o.before}, {"after", o.after},
              {"reason", o.reason}, {"reboot_required", o.reboot_required}};
}

json to_json(const ApplyResult& r) {
  // Steps in the order they ran, each with its knobs in order.
  json steps = json::array();
  for (const auto& o : r.knobs) {
    if (steps.empty() || steps.back()["step"] != o.step)
      steps.push_back(json{{"step", o.step}, {"knobs", json::array()}});
    steps.back()["knobs"].push_back(to_json(o));
  }
  return json{{"changed", r.changed},
              {"reboot_required", r.reboot_required},
              {"rolled_back", r.rolled_back},
              {"exit_code", r.exit_code},
              {"error", r.error},
              {"notes", r.notes},
              {"steps", steps}};
}

}  // namespace epyctune::stack
