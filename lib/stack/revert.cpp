#include "stack/revert.hpp"

#include <fmt/format.h>

#include "stack/journal.hpp"
#include "stack/privileges.hpp"
#include "stack/state_lock.hpp"

namespace epyctune::stack {

using nlohmann::json;

RevertResult revert_journal(const host::Sysroot& sys) {
  RevertResult r;
  if (!sys.exists(kJournalPath)) {
    r.notes.push_back("nothing to revert: no journal at " + sys.resolve(kJournalPath).string());
    return r;
  }
  Journal journal(sys);
  auto contents = journal.load();  // JournalError propagates: nothing restored yet
  std::vector<std::pair<std::string, std::string>> caps;
  for (const auto& e : contents.entries)
    if (e.loc.kind == KnobKind::Msr) caps.emplace_back("CAP_SYS_RAWIO", "MSR " + e.loc.path);
  auto missing = missing_privileges(sys, caps);
  if (!missing.empty()) {
    r.exit_code = kExitPrivilege;
    r.error = "not reverting, missing: ";
    for (size_t i = 0; i < missing.size(); ++i) r.error += (i ? "; " : "") + missing[i];
    return r;
  }
  std::optional<StateLock> lock;
  try {
    lock.emplace(sys);
  } catch (const LockHeldError& e) {
    r.exit_code = kExitLocked;
    r.error = e.what();
    return r;
  }
  if (!lock->recovered().empty()) r.notes.push_back(lock->recovered());
  contents = journal.load();  // again under the lock: another writer may have appended
  r.had_journal = true;
  if (!contents.torn_tail.empty())
    r.notes.push_back(
        "ignored an incomplete last journal line (the process died while "
        "journaling; that knob was never written)");
  bool failed = false;
  for (auto it = contents.entries.rbegin(); it != contents.entries.rend(); ++it) {
    KnobOutcome o;
    o.step = it->step;
    o.name = it->name;
    o.key = it->loc.key();
    o.path = it->loc.path;
    o.after = it->original.display();
    try {
      if (it->loc.kind != KnobKind::Dir || sys.exists(it->loc.path) || it->original.present)
        o.before = read_location(sys, it->loc).display();
      else
        o.before = "(absent)";
      restore_knob(sys, it->loc, it->original);
      auto now = read_location(sys, it->loc);
      o.status = o.before == now.display() ? "unchanged" : "restored";
      r.changed |= o.status == "restored";
      o.after = now.display();
    } catch (const std::exception& e) {
      o.status = "failed";
      o.reason = fmt::format("{} (journal line {})", e.what(), it->line);
      failed = true;
    }
    r.knobs.push_back(std::move(o));
  }
  if (failed) {
    // Keep the journal: it is the only record of the originals not yet back.
    r.exit_code = kExitFailed;
    r.error =
        "some originals could not be restored; the journal is kept, fix the cause and "
        "run `epyctune revert` again";
    return r;
  }
  journal.remove();
  lock->remove_file();
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
