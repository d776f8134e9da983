#include "daemon/system.hpp"

#ifdef EPYCTUNE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "common/atomic_file.hpp"
#include "host/shutdown.hpp"

namespace epyctune::daemon {

void notify(const std::string& state) {
#ifdef EPYCTUNE_HAVE_SYSTEMD
  ::sd_notify(0, state.c_str());
#else
  (void)state;
#endif
}

bool system_shutting_down() {
  return host::system_shutting_down();
}

void write_atomic(const std::filesystem::path& path, std::string_view content, mode_t mode) {
  epyctune::write_file_atomic(path, content, mode);
}

}  // namespace epyctune::daemon
