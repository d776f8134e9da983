// The write-ahead journal: before the stack changes a knob for the first time,
// the knob's location and original value are appended here and fsync'd; only
// then is the knob written. A crash, kill -9 or reboot between two writes
// therefore never loses an original, and `revert` replays the journal
// backwards from the locations alone (no profile needed).
//
// Format: JSON lines under the sysroot at /var/lib/epyctune/journal. The first
// line is a header recording which state directories epyctune created (so a
// full revert leaves no trace); every other line is one knob's original.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "host/sysroot.hpp"
#include "stack/knob.hpp"

namespace epyctune::stack {

inline constexpr const char* kStateDir = "/var/lib/epyctune";
inline constexpr const char* kJournalPath = "/var/lib/epyctune/journal";
inline constexpr const char* kLockPath = "/var/lib/epyctune/lock";

// A journal that cannot be parsed. Names the file and line; nothing is written
// while the journal is unreadable, since it holds the only copy of originals.
class JournalError : public std::runtime_error {
 public:
  JournalError(const std::string& path, int line, const std::string& problem);
  int line() const { return line_; }

 private:
  int line_;
};

struct JournalEntry {
  int line = 0;  // 1-based line in the file
  std::string step;
  std::string name;
  std::string profile;  // the profile that first changed the knob
  KnobLocation loc;
  KnobValue original;
};

struct JournalContents {
  bool exists = false;
  std::vector<std::string> created_dirs;  // state dirs to remove after a full revert
  std::vector<JournalEntry> entries;
  std::string torn_tail;  // a last line without newline (crash mid-append), ignored
};

class Journal {
 public:
  explicit Journal(const host::Sysroot& sys) : sys_(sys) {}

  // Throws JournalError on a malformed line.
  JournalContents load() const;
  // Creates the journal with its header when absent (fsync'd, directory too).
  void ensure_header(const std::vector<std::string>& created_dirs) const;
  // Appends one entry and fsyncs before returning: the write-ahead step.
  void append(const JournalEntry& entry) const;
  // Removes the journal (after a complete revert).
  void remove() const;

 private:
  void append_line(const std::string& line) const;
  const host::Sysroot& sys_;
};

// Creates /var/lib/epyctune (and missing parents) under the sysroot; returns
// the directories it created, outermost first.
std::vector<std::string> ensure_state_dir(const host::Sysroot& sys);

}  // namespace epyctune::stack
