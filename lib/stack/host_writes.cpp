#include "stack/host_writes.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <atomic>
#include <cerrno>
#include <mutex>

namespace epyctune::stack {

namespace {

// Pseudo filesystems whose files are kernel interfaces (linux/magic.h).
constexpr long kSysfsMagic = 0x62656572;
constexpr long kProcMagic = 0x9fa0;
constexpr long kResctrlMagic = 0x7655821;
constexpr long kDebugfsMagic = 0x64626720;
constexpr long kCgroup2Magic = 0x63677270;

std::mutex g_mu;
WriteHooks g_hooks;
std::atomic<uint64_t> g_count{0};

WriteHooks hooks() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_hooks;
}

template <typename F>
void counted(const host::Sysroot& sys, std::string_view path, F&& op) {
  auto resolved = sys.resolve(path).string();
  auto h = hooks();
  if (h.before) h.before(resolved);
  op();
  ++g_count;
  if (h.after) h.after(resolved);
}

}  // namespace

bool is_kernel_fs(const host::Sysroot& sys, std::string_view host_path) {
  long t = sys.fs_type(host_path);
  return t == kSysfsMagic || t == kProcMagic || t == kResctrlMagic || t == kDebugfsMagic ||
         t == kCgroup2Magic;
}

void host_write(const host::Sysroot& sys, std::string_view path, std::string_view data) {
  spdlog::debug("write {} <- {}", path, data.substr(0, data.find_last_not_of('\n') + 1));
  counted(sys, path, [&] { sys.write(path, data); });
}

void host_write_file(const host::Sysroot& sys, std::string_view path, std::string_view data) {
  spdlog::debug("write file {} ({} bytes)", path, data.size());
  counted(sys, path, [&] { sys.write_file_atomic(path, data); });
}

void host_remove_file(const host::Sysroot& sys, std::string_view path) {
  spdlog::debug("remove file {}", path);
  counted(sys, path, [&] { sys.remove_file(path); });
}

void host_make_dir(const host::Sysroot& sys, std::string_view path) {
  spdlog::debug("mkdir {}", path);
  counted(sys, path, [&] { sys.make_dir(path); });
}

void host_remove_dir(const host::Sysroot& sys, std::string_view path) {
  spdlog::debug("rmdir {}", path);
  counted(sys, path, [&] {
    if (!is_kernel_fs(sys, path) && std::string_view(path).starts_with("/sys/fs/resctrl/")) {
      // A resctrl group on a plain filesystem (a rehearsal tree): the kernel
      // would drop its files with it; only a group we created reaches here
      // (revert of a Dir knob whose original was absent), so they are ours.
      // Anywhere else a directory must already be empty: a damaged or forged
      // journal must not be able to delete a tree.
      for (const auto& name : sys.list(path)) {
        std::string child = std::string(path) + "/" + name;
        if (!sys.is_dir(child)) sys.remove_file(child);
      }
    }
    sys.remove_dir(path);
  });
}

void host_write_msr(const host::Sysroot& sys, int cpu, uint32_t address, uint64_t value) {
  spdlog::debug("write MSR {:#x} on CPU {} <- {:#x}", address, cpu, value);
  counted(sys, sys.msr_path(cpu), [&] { sys.write_msr(cpu, address, value); });
}

void set_write_hooks(WriteHooks h) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_hooks = std::move(h);
}

void clear_write_hooks() {
  set_write_hooks({});
}

uint64_t write_count() {
  return g_count.load();
}
void reset_write_count() {
  g_count = 0;
}

}  // namespace epyctune::stack
