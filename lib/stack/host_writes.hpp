// Every write the stack makes to host state goes through these functions, so
// that (1) writes are counted and a test's hook runs after each one (the crash
// tests _exit() there after the k-th), (2) a test can inject a failure before
// a given write, and (3) the difference between a kernel attribute and a plain
// file is decided in one place.
//
// Why the difference matters: sysfs/procfs/resctrl files are interfaces — the
// kernel parses what we write ("never") and prints something else
// ("always madvise [never]"), merges a partial schemata line, and populates a
// new resctrl group. A plain file on a disk filesystem (a rehearsal --sysroot
// tree, /etc, /var/lib) has nothing behind it: its bytes are the state, so we
// restore them byte-for-byte and do ourselves what the kernel would do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "host/sysroot.hpp"

namespace epyctune::stack {

// True for sysfs, procfs and resctrl (and other kernel pseudo filesystems).
// Looks at the nearest existing ancestor when the path does not exist yet.
bool is_kernel_fs(const host::Sysroot& sys, std::string_view host_path);

// The counted host writes. Each throws host::HostError on failure.
void host_write(const host::Sysroot& sys, std::string_view path, std::string_view data);
void host_write_file(const host::Sysroot& sys, std::string_view path, std::string_view data);
void host_remove_file(const host::Sysroot& sys, std::string_view path);
void host_make_dir(const host::Sysroot& sys, std::string_view path);
// rmdir on a kernel fs (resctrl removes the group's files itself); on a plain
// filesystem the files we created inside (schemata) go first.
void host_remove_dir(const host::Sysroot& sys, std::string_view path);
void host_write_msr(const host::Sysroot& sys, int cpu, uint32_t address, uint64_t value);

// Test hooks; the shipped tools install none. Called with the resolved path
// before each counted write; may throw host::HostError to simulate a kernel
// refusing a write (EIO on a managed IRQ). Called after each completed write
// too, once it is counted (a test shrinks a hugepage count there, as a kernel
// that could not reserve them all would; a crash test _exit()s there, as a
// kill -9 would leave the process: tests/write_crash.hpp).
struct WriteHooks {
  std::function<void(const std::string& path)> before;
  std::function<void(const std::string& path)> after;
};
void set_write_hooks(WriteHooks hooks);
void clear_write_hooks();

// Number of counted writes since the process started (or the last reset).
uint64_t write_count();
void reset_write_count();

}  // namespace epyctune::stack
