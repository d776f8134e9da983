#include "stack/revert.hpp"

#include <fmt/format.h>

#include "stack/confine.hpp"
#include "stack/journal.hpp"
#include "stack/privileges.hpp"
#include "stack/state_lock.hpp"

namespace epyctune::stack {

using nlohmann::json;

namespace {

// Every entry must name a place the stack may write, or nothing is replayed:
// a forged or damaged journal must not reach outside the tuning knobs.
std::string refused_entries(const std::string& path, const JournalContents& c) {
  std::string out;
  for (const auto& e : c.entries) {
    std::string problem = location_problem(e.loc);
    if (problem.empty() && (e.loc.kind == KnobKind::Cmdline || e.loc.kind == KnobKind::Check))
      problem = fmt::format("{} knob '{}' is read-only and is never journaled",
                            to_string(e.loc.kind), e.loc.path);
    if (!problem.empty())
      out +=
          fmt::format("{}journal {} line {}: {}", out.empty() ? "" : "; ", path, e.line, problem);
  }
  for (const auto& d : c.created_dirs) {
    KnobLocation loc;
    loc.kind = KnobKind::Dir;
    loc.path = d;
    std::string problem = location_problem(loc);
    if (!problem.empty() || (d != "/var" && d != "/var/lib" && d != kStateDir))
      out += fmt::format(
          "{}journal {} header: created directory '{}' is not epyctune's state "
          "directory or one of its parents",
          out.empty() ? "" : "; ", path, d);
  }
  return out;
}

KnobOutcome restore_entry(const host::Sysroot& sys, const JournalEntry& e, bool& changed) {
  KnobOutcome o;
  o.step = e.step;
  o.name = e.name;
  o.key = e.loc.key();
  o.path = e.loc.path;
  o.after = e.original.display();
  try {
    if (e.loc.kind != KnobKind::Dir || sys.exists(e.loc.path) || e.original.present)
      o.before = read_location(sys, e.loc).display();
    else
      o.before = "(absent)";
    restore_knob(sys, e.loc, e.original);
    auto now = read_location(sys, e.loc);
    o.status = o.before == now.display() ? KnobStatus::Unchanged : KnobStatus::Restored;
    changed |= o.status == KnobStatus::Restored;
    o.after = now.display();
  } catch (const std::exception& ex) {
    o.status = KnobStatus::Failed;
    o.reason = fmt::format("{} (journal line {})", ex.what(), e.line);
  }
  return o;
}

}  // namespace

RevertResult revert_journal(const host::Sysroot& sys) {
  RevertResult r;
  std::string path = sys.resolve(kJournalPath).string();
  // Not exists(): a symlink loop or a dangling link at the journal's name is
  // not "no journal", it is a journal that cannot be read.
  if (!sys.exists_nofollow(kJournalPath)) {
    r.notes.push_back("nothing to revert: no journal at " + path);
    return r;
  }
  // Root first: the journal is 0600, and a user who may not read it is
  // missing a privilege (exit 4), not holding a bad journal.
  auto missing = missing_privileges(sys, {}, "reading the journal and restoring its knobs");
  Journal journal(sys);
  JournalContents contents;
  if (missing.empty()) {
    contents = journal.load();  // JournalError propagates: nothing restored yet
    std::vector<std::pair<std::string, std::string>> caps;
    for (const auto& e : contents.entries)
      if (e.loc.kind == KnobKind::Msr) caps.emplace_back("CAP_SYS_RAWIO", "MSR " + e.loc.path);
    missing = missing_privileges(sys, caps);
  }
  if (!missing.empty()) {
    r.exit_code = kExitPrivilege;
    r.error = "not reverting, missing: ";
    for (size_t i = 0; i < missing.size(); ++i) r.error += (i ? "; " : "") + missing[i];
    return r;
  }
  auto lock = take_state_lock(sys, r.exit_code, r.error, r.notes);
  if (!lock) return r;
  contents = journal.load();  // again under the lock: another writer may have appended
  r.had_journal = true;
  if (auto refused = refused_entries(path, contents); !refused.empty()) {
    r.exit_code = kExitError;
    r.error = "not reverting anything: " + refused +
              ". Those records do not name a knob epyctune writes; the journal is kept";
    return r;
  }
  if (!contents.torn_tail.empty())
    r.notes.push_back(fmt::format(
        "ignored an incomplete record past the journal's seal at {} (the process died while "
        "journaling; that knob was never written)",
        contents.torn_tail));
  bool failed = false;
  for (auto it = contents.entries.rbegin(); it != contents.entries.rend(); ++it) {
    r.knobs.push_back(restore_entry(sys, *it, r.changed));
    failed |= r.knobs.back().status == KnobStatus::Failed;
  }
  if (failed || !contents.damage.empty()) {
    // Keep the journal: it is the only record of the originals not yet back.
    r.exit_code = kExitFailed;
    if (!contents.damage.empty()) {
      r.error = fmt::format("the journal {} is damaged: ", path);
      for (size_t i = 0; i < contents.damage.size(); ++i)
        r.error += (i ? "; " : "") + contents.damage[i];
      r.error += fmt::format(
          ". Its {} intact record(s) were replayed{}; an original in the damaged part may "
          "not be back. The journal is kept: check the knobs `epyctune plan` reports as "
          "changed, then move {} aside",
          contents.entries.size(), failed ? " (some failed, see above)" : "", path);
    } else {
      r.error =
          "some originals could not be restored; the journal is kept, fix the cause and "
          "run `epyctune revert` again";
    }
    return r;
  }
  journal.remove();
  lock->release();
  for (auto it = contents.created_dirs.rbegin(); it != contents.created_dirs.rend(); ++it) {
    if (sys.is_dir(*it) && sys.list(*it).empty()) sys.remove_dir(*it);
  }
  return r;
}

json to_json(const RevertResult& r) {
  json knobs = json::array();
  for (const auto& o : r.knobs) knobs.push_back(to_json(o));
  return json{{"changed", r.changed},     {"had_journal", r.had_journal},
              {"exit_code", r.exit_code}, {"error", r.error},
              {"notes", r.notes},         {"knobs", knobs}};
}

}  // namespace epyctune::stack
