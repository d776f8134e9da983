// The daemon's side of the control socket. One thread polls the listening
// socket and every connection; requests are handed, one at a time, to the
// handler on a second thread, so a slow or hostile client never holds up
// anyone else; a long apply only delays the requests queued behind it (the
// queue is bounded: beyond it a request gets "busy" at once). A peer without
// access is refused when it connects, so it never takes a slot, and some
// slots are kept for root, so readers cannot lock root out.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "control/protocol.hpp"

namespace epyctune::control {

// Runs one request and returns its result object. Throws ProtocolError for a
// protocol-level refusal, anything else derived from std::exception for a
// failure ("failed", with what()). Called only after the peer's access was
// checked against the method.
using Handler = std::function<nlohmann::json(const Request&, const Peer&)>;

struct ServerOptions {
  std::string path;                    // full path (already beneath the sysroot)
  std::string read_group{kReadGroup};  // "" = only root
  int max_clients = 16;                // more get a "busy" reply and are closed
  int root_slots = 4;                  // of max_clients, kept for root: others get the rest
  int request_timeout_ms = 5000;       // a request line must arrive within this
  // A connection that completes no request for this long is closed: bytes
  // that form no request (blank lines, a trickle) do not renew it.
  int idle_timeout_ms = 60000;
};

class Server {
 public:
  // Creates the parent directory (0755) if missing, removes a stale socket
  // file (one nobody listens on), binds, and sets mode 0666: access is decided
  // per request from SO_PEERCRED, not by file mode. Throws std::runtime_error
  // naming the path when another daemon already listens there.
  Server(ServerOptions opts, Handler handler);
  ~Server();  // stops, joins, unlinks the socket
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves on background threads until stop() or destruction.
  void start();
  // Safe from any thread; returns when the threads have joined.
  void stop();
  const std::string& path() const;

  // The access a peer gets: root write, a member of read_group (primary or
  // supplementary, from /etc/group via getgrnam) read, else none.
  static Access access_for(unsigned uid, unsigned gid, const std::string& read_group);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epyctune::control
