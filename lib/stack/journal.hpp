// The write-ahead journal: before the stack changes a knob for the first time,
// the knob's location and original value are appended here and fsync'd; only
// then is the knob written. A crash, kill -9 or reboot between two writes
// therefore never loses an original, and `revert` replays the journal
// backwards from the locations alone (no profile needed).
//
// Format 2 (docs/json/stack.md, "Journal"): under the sysroot at
// /var/lib/epyctune/journal, mode 0600. A fixed-size seal line first (how many
// records and bytes are committed, itself checksummed), then one record per
// line, "<length> <crc32> <json>": a header record (writer version, state
// directories epyctune created) and one record per knob original. Each append
// is fsync'd, then the seal is advanced and fsync'd, and only then is the knob
// written. So a record past the seal belongs to a knob never written, and any
// loss inside the sealed part (truncation, a bad checksum) is detected: revert
// restores every intact record, names the damage, and keeps the journal.
// Format 1 (JSON lines without seal or checksums) is still read.
#pragma once

#include <cstdint>
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

// Journals larger than this are refused rather than read.
inline constexpr size_t kMaxJournalBytes = 64u << 20;

struct JournalContents {
  bool exists = false;
  int format = 0;                         // 1 (legacy JSON lines) or 2
  std::string writer;                     // epyctune version that created it (format 2)
  std::vector<std::string> created_dirs;  // state dirs to remove after a full revert
  std::vector<JournalEntry> entries;      // every intact record
  // Lost or corrupt parts, each naming its line and byte offset. Non-empty:
  // some original may be missing, so the journal must not be deleted.
  std::vector<std::string> damage;
  // Format 2: a torn record past the seal (the process died inside the
  // append, before the knob was written), ignored. Its byte offset.
  std::string torn_tail;
  uint64_t sealed_records = 0, sealed_bytes = 0;
  uint64_t intact_end = 0;  // byte offset just past the last intact record
};

// One format-2 record line for a JSON text: "<length> <crc32> <json>\n".
std::string journal_record(const std::string& json_text);

class Journal {
 public:
  explicit Journal(const host::Sysroot& sys) : sys_(sys) {}

  // Throws JournalError on a structurally invalid record (one whose checksum
  // holds but whose content is not a journal record), on a journal that is
  // not a regular file (symlink, FIFO, device, directory) or too large.
  // Damage (truncation, a bad checksum) is reported in `damage`, not thrown.
  JournalContents load() const;
  // Under the lock, before the first append of a run: creates the journal with
  // its header when absent (atomically: it appears complete or not at all),
  // rewrites a format-1 journal as format 2, and drops a torn tail past the seal.
  void open_for_append(const JournalContents& current, const std::vector<std::string>& created);
  // Appends one entry, fsyncs, advances the seal, fsyncs: the write-ahead step.
  void append(const JournalEntry& entry);
  // Removes the journal (after a complete revert).
  void remove() const;

 private:
  void write_seal();
  const host::Sysroot& sys_;
  host::UniqueFd fd_;
  uint64_t records_ = 0, length_ = 0;
};

// The version written into new journals' headers.
const char* journal_writer_version();

// Creates /var/lib/epyctune (and missing parents) under the sysroot; returns
// the directories it created, outermost first.
std::vector<std::string> ensure_state_dir(const host::Sysroot& sys);

}  // namespace epyctune::stack
