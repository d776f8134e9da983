// The control socket's methods (control/protocol.hpp) mapped onto the daemon:
// status, plan, verify (read); apply, revert, reload, engine.start,
// engine.stop (write); engine.status (read). The engine methods take an
// optional {"name": "..."}; without it they act on every instance.
#pragma once

#include "control/server.hpp"
#include "daemon/daemon.hpp"

namespace epyctune::daemon {

control::Handler make_handler(Daemon& d);

}  // namespace epyctune::daemon
