// The process exit codes of every `epyctune` command, one table for all of
// them (documented for users in docs/exit-codes.md; keep the two in step).
#pragma once

namespace epyctune {

inline constexpr int kExitOk = 0;  // done (changed or not), or nothing to do
// Bad input or usage: unknown option, bad profile, profile/host mismatch,
// unreadable journal, nothing applied where something must be. Nothing written.
inline constexpr int kExitError = 1;
// A knob failed or read back differently (apply: rolled back unless
// --keep-going; revert: journal kept), or verify found a failed check.
inline constexpr int kExitFailed = 2;
inline constexpr int kExitLocked = 3;     // another epyctune holds the lock
inline constexpr int kExitPrivilege = 4;  // missing root / capability, nothing written

// One line for --help footers, pointing at the full table.
inline constexpr const char* kExitCodesFooter =
    "Exit codes (every command): 0 ok; 1 bad input or usage; 2 a knob failed or a check found "
    "drift; 3 another epyctune holds the lock; 4 missing root/capability. See docs/exit-codes.md.";

}  // namespace epyctune
