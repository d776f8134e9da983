// A knob is one piece of host state the stack reads and may write: a sysfs or
// procfs value, a whole file (or one TOML section of it), a directory's
// presence, MSR bits under a mask, one resctrl schemata domain, or a read-only
// check (kernel command line, firmware setting). Plan, apply, verify, revert and
// the journal are written once over knobs; steps only build lists of them.
//
// A KnobLocation holds everything needed to read, write and restore the knob,
// and it round-trips through JSON, so `revert` rebuilds it from the journal
// alone, without the profile that created it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "host/sysroot.hpp"

namespace epyctune::stack {

enum class KnobKind {
  Value,     // one sysfs/procfs attribute, written in place
  File,      // a whole file (or one [section] of a TOML file) that may be absent
  Dir,       // a directory's presence (resctrl group, drop-in directory)
  Msr,       // bits of an MSR under a mask, read-modify-write, one CPU
  Schemata,  // one L3 domain's mask in a resctrl group's schemata file
  Cmdline,   // read-only: a kernel command-line parameter in /proc/cmdline
  Check,     // read-only: a value the step observed (firmware, conflicts)
};

// How a Value knob's text is compared: the kernel prints a choice as
// "always [madvise] never" but takes "madvise" as input.
// FlagsCpulist: "domain,managed_irq,2-5" (isolcpus): flags in any order + CPUs.
enum class Canon { Plain, Choice, Cpulist, Cpumask, Int, FlagsCpulist };

struct KnobLocation {
  KnobKind kind = KnobKind::Value;
  std::string path;  // host path; for Msr /dev/cpu/N/msr; for Cmdline /proc/cmdline
  Canon canon = Canon::Plain;
  std::string section;  // File: the TOML [section] this knob owns; "" = whole file
  std::string param;    // Cmdline: parameter name; Check: what is checked
  int cpu = -1;         // Msr
  uint32_t msr = 0;     // Msr address
  uint64_t mask = 0;    // Msr bits this knob owns
  int domain = -1;      // Schemata: L3 cache id (resctrl domain id)

  // Identity: two knobs with the same key are the same piece of host state.
  std::string key() const;
  nlohmann::json to_json() const;
  // Throws std::runtime_error naming the missing/bad field.
  static KnobLocation from_json(const nlohmann::json& j);
};

// What a knob holds. `value` is the comparable form (choice word, canonical CPU
// list, masked MSR bits); `raw` is the exact bytes (restored byte-for-byte on a
// plain disk file); `input` is what to write to the kernel to get it back.
struct KnobValue {
  bool present = false;
  std::string value;
  std::string raw;
  std::string input;

  nlohmann::json to_json() const;
  static KnobValue from_json(const nlohmann::json& j);
  std::string display() const {
    return !present ? std::string("(absent)") : value.empty() ? std::string("(empty)") : value;
  }
};

struct Knob {
  std::string step;  // "bios", "numa", ...
  std::string name;  // short, unique within the step: "smt", "irq 24 affinity"
  KnobLocation loc;
  // Desired value in input form ("never", "0-3", "0x2f", "present", file text).
  // nullopt: nothing to write (read-only check, or unsupported).
  std::optional<std::string> desired;
  std::string unsupported;  // non-empty: cannot be read or written here, and why
  // Read-only knobs: `observed` is the current value (Check), `instruction` what
  // the operator must do when it differs.
  bool read_only = false;
  std::string observed;
  std::string instruction;
  // Read-only knob fixed by another knob at next boot (cmdline <- drop-in).
  std::string satisfied_by;               // KnobLocation::key() of that knob
  bool reboot_required = false;           // a change here takes effect at next boot
  bool informational = false;             // cannot be observed at all: verify skips it
  std::string eio_means;                  // EIO on write is not an error but this (managed IRQ)
  std::string mismatch_hint;              // why a read-back may differ (partial hugepages)
  std::vector<std::string> capabilities;  // needed on a live host: "CAP_SYS_RAWIO"
};

// Canonical comparable form of a text under a Canon ("ff" mask -> "0-7").
std::string canonical(Canon canon, const std::string& text);

// Reads a knob's current value from the host. Read-only Check knobs return
// their observed value. Throws host::HostError on I/O errors other than absence.
KnobValue read_knob(const host::Sysroot& sys, const Knob& knob);
KnobValue read_location(const host::Sysroot& sys, const KnobLocation& loc);

// True when `current` already equals `desired` (in input form).
bool knob_matches(const KnobLocation& loc, const KnobValue& current, const std::string& desired);

// Writes the desired value (input form). Goes through the counted writer.
void write_knob(const host::Sysroot& sys, const KnobLocation& loc, const std::string& desired);

// Puts back a value previously read with read_location (revert and rollback).
// Idempotent, so an interrupted revert can simply be run again.
void restore_knob(const host::Sysroot& sys, const KnobLocation& loc, const KnobValue& original);

std::string to_string(KnobKind k);
std::string to_string(Canon c);

}  // namespace epyctune::stack
