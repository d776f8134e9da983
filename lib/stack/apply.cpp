#include "stack/apply.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "stack/confine.hpp"
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
    case EXDEV:
      return "EXDEV";
    case ELOOP:
      return "ELOOP";
    case EFBIG:
      return "EFBIG";
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
      o.status = KnobStatus::RolledBack;
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

std::string read_fault(const KnobPlan& p) {
  return fmt::format("{}/{}: cannot read its current value: {} ({})", p.knob.step, p.knob.name,
                     p.read_error, errno_name(p.read_errno));
}

bool permission_fault(const KnobPlan& p) {
  return p.read_errno == EACCES || p.read_errno == EPERM;
}

// What root is needed for here: "writing 181 knob(s) of steps bios, numa;
// reading 126 knob(s) of steps prefetch", steps in plan order. A dry run
// (`with_writes` false) names the reads only.
std::string root_needed_for(const std::vector<KnobPlan>& plans, bool with_writes = true) {
  std::vector<std::string> write_steps, read_steps;
  size_t writes = 0, reads = 0;
  auto note = [](std::vector<std::string>& steps, const std::string& step) {
    if (std::find(steps.begin(), steps.end(), step) == steps.end()) steps.push_back(step);
  };
  for (const auto& p : plans) {
    if (with_writes && p.status == PlanStatus::Change) {
      ++writes;
      note(write_steps, p.knob.step);
    } else if (permission_fault(p)) {
      ++reads;
      note(read_steps, p.knob.step);
    }
  }
  std::string out;
  if (writes)
    out = fmt::format("writing {} knob(s) of steps {}", writes, fmt::join(write_steps, ", "));
  if (reads)
    out += fmt::format("{}reading {} knob(s) of steps {}", out.empty() ? "" : "; ", reads,
                       fmt::join(read_steps, ", "));
  return out;
}

// A dry run writes nothing, so it needs no privilege, except to read: a knob
// this process may not read is skipped as needing root (exit 4 when nothing
// else failed), never counted as a failure of the host.
ApplyResult check_run(const std::vector<KnobPlan>& plans) {
  ApplyResult r;
  size_t unreadable = 0;
  for (const auto& p : plans) {
    auto o = outcome_of(p);
    bool denied = permission_fault(p);
    o.status = p.status == PlanStatus::Change      ? KnobStatus::WouldApply
               : p.status == PlanStatus::Unchanged ? KnobStatus::Unchanged
               : p.read_errno != 0 && !denied      ? KnobStatus::Failed
                                                   : KnobStatus::Skipped;
    if (denied) {
      o.before = o.after = "(unreadable)";
      o.reason = fmt::format("needs root: reading it was refused ({})", errno_name(p.read_errno));
      ++unreadable;
    } else if (p.read_errno != 0 && r.exit_code != kExitFailed) {
      r.error = read_fault(p);
      r.exit_code = kExitFailed;
    }
    if (p.status == PlanStatus::Change) {
      o.after = p.desired_display();
      r.changed = true;
    }
    o.reboot_required = (p.status == PlanStatus::Change && p.knob.reboot_required) ||
                        p.status == PlanStatus::Pending;
    r.reboot_required |= o.reboot_required;
    r.knobs.push_back(std::move(o));
  }
  if (unreadable > 0 && r.exit_code == kExitOk) {
    r.exit_code = kExitPrivilege;
    r.error = "missing: root (" + root_needed_for(plans, false) + ")";
  }
  return r;
}

// A missing privilege, named with what needs it: the first thing checked, so
// an unprivileged run stops before anything else is said of the host.
bool refused_for_privilege(const host::Sysroot& sys, const std::vector<KnobPlan>& plans,
                           ApplyResult& r) {
  std::vector<std::pair<std::string, std::string>> caps;
  for (const auto& p : plans)
    if (p.status == PlanStatus::Change || permission_fault(p))
      for (const auto& c : p.knob.capabilities)
        caps.emplace_back(c, fmt::format("{}: {}", p.knob.step, p.knob.loc.path));
  auto missing = missing_privileges(sys, caps, root_needed_for(plans));
  if (missing.empty()) return false;
  r.exit_code = kExitPrivilege;
  r.error = "not applying, missing: ";
  for (size_t i = 0; i < missing.size(); ++i) r.error += (i ? "; " : "") + missing[i];
  return true;
}

// Everything that stops a run before its first write: a missing privilege, a
// knob whose current value cannot be read, a location outside what the stack
// may write. Every problem of the second kind found is said at once.
bool refused_before_writing(const host::Sysroot& sys, const std::vector<KnobPlan>& plans,
                            ApplyResult& r) {
  if (refused_for_privilege(sys, plans, r)) return true;
  std::vector<std::string> faults;
  for (const auto& p : plans)
    if (p.read_errno != 0) faults.push_back(read_fault(p));
  if (!faults.empty()) {
    r.exit_code = kExitFailed;
    r.error = "not applying, " + faults.front();
    for (size_t i = 1; i < faults.size(); ++i) r.error += "; " + faults[i];
    for (const auto& p : plans) {
      auto o = outcome_of(p);
      o.status = p.read_errno != 0 ? KnobStatus::Failed : KnobStatus::Skipped;
      if (p.read_errno == 0) o.reason = "not attempted: a knob could not be read";
      r.knobs.push_back(std::move(o));
    }
    return true;
  }
  for (const auto& p : plans) {
    if (p.status != PlanStatus::Change) continue;
    auto problem = location_problem(p.knob.loc);
    if (!problem.empty()) {
      r.exit_code = kExitError;
      r.error = fmt::format("not applying, {}/{}: {}", p.knob.step, p.knob.name, problem);
      return true;
    }
  }
  return false;
}

// One run's writes: the journal (opened on the first change), what is
// already journaled, what this run changed (for rollback).
struct Run {
  const host::Sysroot& sys;
  const ApplyOptions& opts;
  ApplyResult& r;
  Journal journal;
  std::set<std::string> journaled;
  std::vector<Applied> applied;
  bool stopped = false;
};

// The write-ahead step: the first time any run changes a knob, its original
// goes into the journal (fsync'd, sealed) before the knob is touched.
void journal_original(Run& run, const KnobPlan& p) {
  const auto& k = p.knob;
  if (run.journaled.count(k.loc.key())) return;
  run.journal.append({0, k.step, k.name, run.opts.profile, k.loc, p.current});
  run.journaled.insert(k.loc.key());
}

// A write (or journal append) failed: say which knob, path and errno, and
// roll back this run unless keep_going.
void fail_knob(Run& run, KnobOutcome o, const Knob& k, const std::string& reason) {
  o.status = KnobStatus::Failed;
  o.reason = reason;
  run.r.error = fmt::format("{}/{} failed: {}", k.step, k.name, o.reason);
  run.r.exit_code = kExitFailed;
  run.r.knobs.push_back(std::move(o));
  if (!run.opts.keep_going) {
    auto problems = roll_back(run.sys, run.applied, run.r.knobs);
    run.r.notes.insert(run.r.notes.end(), problems.begin(), problems.end());
    run.r.rolled_back = true;
    run.stopped = true;
  }
}

// Read back and compare: never silent when the kernel holds something else.
void read_back(Run& run, const KnobPlan& p, KnobOutcome& o) {
  const auto& k = p.knob;
  KnobValue after;
  try {
    after = read_location(run.sys, k.loc);
  } catch (const host::HostError& e) {
    after.value = fmt::format("(unreadable: {})", e.what());
  }
  o.after = after.display();
  o.reboot_required = k.reboot_required;
  run.r.reboot_required |= k.reboot_required;
  if (knob_matches(k.loc, after, *k.desired)) {
    o.status = KnobStatus::Applied;
    o.reason.clear();
    return;
  }
  o.status = KnobStatus::Mismatch;
  o.reason = fmt::format("wrote {}, read back {}", p.desired_display(), after.display());
  if (!k.mismatch_hint.empty()) o.reason += ": " + k.mismatch_hint;
  run.r.exit_code = kExitFailed;
  if (run.r.error.empty()) run.r.error = fmt::format("{}/{}: {}", k.step, k.name, o.reason);
}

// Journal the original, write, read back and compare one planned change.
void change_knob(Run& run, const KnobPlan& p, KnobOutcome o) {
  const auto& k = p.knob;
  try {
    journal_original(run, p);
    write_knob(run.sys, k.loc, *k.desired);
  } catch (const host::HostError& e) {
    if (e.err() == EIO && !k.eio_means.empty()) {
      o.status = KnobStatus::Skipped;
      o.reason = k.eio_means;
      run.r.knobs.push_back(std::move(o));
      return;
    }
    fail_knob(run, std::move(o), k, fmt::format("{} ({})", e.what(), errno_name(e.err())));
    return;
  }
  run.r.changed = true;
  run.applied.push_back({run.r.knobs.size(), k.loc, p.current});
  read_back(run, p, o);
  run.r.knobs.push_back(std::move(o));
}

// One knob of the run, re-planned right before writing: an earlier knob may
// have changed it.
void apply_one(Run& run, const KnobPlan& planned) {
  if (run.stopped) {
    auto o = outcome_of(planned);
    o.status = KnobStatus::Skipped;
    o.reason = "not attempted: an earlier knob failed";
    run.r.knobs.push_back(std::move(o));
    return;
  }
  KnobPlan p = planned.status == PlanStatus::Change ? plan_knob(run.sys, planned.knob) : planned;
  if (planned.status == PlanStatus::Pending) {
    p.status = PlanStatus::Pending;
    p.reason = planned.reason;
  }
  auto o = outcome_of(p);
  if (p.read_errno != 0) {
    fail_knob(run, std::move(o), p.knob, read_fault(p));
    return;
  }
  switch (p.status) {
    case PlanStatus::Change:
      change_knob(run, p, std::move(o));
      return;
    case PlanStatus::Unchanged:
      o.status = KnobStatus::Unchanged;
      break;
    case PlanStatus::Pending:
      o.status = KnobStatus::Skipped;
      o.reboot_required = true;
      break;
    case PlanStatus::Unsupported:
    case PlanStatus::Manual:
    case PlanStatus::Info:
      o.status = KnobStatus::Skipped;
      break;
  }
  run.r.reboot_required |= o.reboot_required;
  run.r.knobs.push_back(std::move(o));
}

}  // namespace

ApplyResult apply_knobs(const host::Sysroot& sys, const std::vector<Knob>& knobs,
                        const ApplyOptions& opts) {
  auto plans = plan_knobs(sys, knobs);
  if (opts.check) return check_run(plans);
  ApplyResult r;
  if (refused_before_writing(sys, plans, r)) return r;

  bool any_change = false;
  for (const auto& p : plans) any_change |= p.status == PlanStatus::Change;
  Run run{sys, opts, r, Journal(sys), {}, {}, false};
  std::unique_ptr<StateLock> lock;
  if (any_change) {
    auto created = ensure_state_dir(sys);
    lock = take_state_lock(sys, r.exit_code, r.error, r.notes);
    if (!lock) return r;
    // Read the journal before any write: an unreadable or damaged journal stops the run.
    auto contents = run.journal.load();
    for (const auto& e : contents.entries) run.journaled.insert(e.loc.key());
    run.journal.open_for_append(contents, created);
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    if (opts.on_progress) opts.on_progress({i, plans.size(), &plans[i].knob});
    apply_one(run, plans[i]);
  }
  if (r.rolled_back) r.changed = false;
  return r;
}

namespace {

// Each status's word, spelled once for to_string and knob_status_from_string.
constexpr std::pair<KnobStatus, std::string_view> kStatusWords[] = {
    {KnobStatus::Applied, "applied"},        {KnobStatus::Unchanged, "unchanged"},
    {KnobStatus::Skipped, "skipped"},        {KnobStatus::Failed, "failed"},
    {KnobStatus::Mismatch, "mismatch"},      {KnobStatus::RolledBack, "rolled-back"},
    {KnobStatus::WouldApply, "would-apply"}, {KnobStatus::Restored, "restored"},
};

}  // namespace

std::string to_string(KnobStatus s) {
  for (const auto& [status, word] : kStatusWords)
    if (status == s) return std::string(word);
  return "unknown";
}

std::optional<KnobStatus> knob_status_from_string(std::string_view s) {
  for (const auto& [status, word] : kStatusWords)
    if (word == s) return status;
  return std::nullopt;
}

json to_json(const KnobOutcome& o) {
  return json{{"step", o.step},     {"knob", o.name},
              {"path", o.path},     {"status", to_string(o.status)},
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
