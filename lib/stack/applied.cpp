#include "stack/applied.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "stack/journal.hpp"

namespace epyctune::stack {

AppliedState read_applied_state(const host::Sysroot& sys) {
  AppliedState s;
  s.journal_path = sys.resolve(kJournalPath).string();
  auto contents = Journal(sys).load();
  s.torn_tail = !contents.torn_tail.empty();
  for (const auto& e : contents.entries) {
    ++s.knobs;
    auto step = std::find_if(s.steps.begin(), s.steps.end(),
                             [&](const auto& kv) { return kv.first == e.step; });
    if (step == s.steps.end())
      s.steps.emplace_back(e.step, 1);
    else
      ++step->second;
    if (std::find(s.profiles.begin(), s.profiles.end(), e.profile) == s.profiles.end())
      s.profiles.push_back(e.profile);
    s.profile = e.profile;
  }
  s.applied = s.knobs > 0;
  struct stat st {};
  if (contents.exists && ::stat(s.journal_path.c_str(), &st) == 0) s.since = st.st_mtime;
  return s;
}

}  // namespace epyctune::stack
