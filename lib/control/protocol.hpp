// The daemon's control protocol: JSON lines over a Unix socket
// (/run/epyctune/epyctuned.sock). One request per line, one reply per line.
//   request: {"id": <string|number|null, optional>, "method": "status", "params": {...}}
//   reply:   {"id": ..., "ok": true,  "result": {...}}
//            {"id": ..., "ok": false, "error": {"code": "forbidden", "message": "..."}}
// Every method needs an access level; the server decides a caller's level from
// its peer credentials (SO_PEERCRED): root writes, members of the epyctune
// group read, everyone else is refused. docs/control-socket.md lists the methods.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::control {

// A request line longer than this is refused with "too_large" and the
// connection closed: nothing a client sends can grow the daemon's memory.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
// Nesting of arrays/objects a request may have; deeper is invalid_request,
// refused before the JSON is built.
inline constexpr int kMaxDepth = 32;
// A string id longer than this is invalid_request (it is echoed back).
inline constexpr std::size_t kMaxIdBytes = 256;
// The client's bound on one reply line (status and plan are larger than any
// request).
inline constexpr std::size_t kMaxReplyBytes = 16 * 1024 * 1024;
// The socket, beneath the sysroot (tests run a daemon on a fixture).
inline constexpr std::string_view kSocketPath = "/run/epyctune/epyctuned.sock";
// The group whose members may read (status, plan, verify, engine.status).
inline constexpr std::string_view kReadGroup = "epyctune";

enum class Access { none, read, write };
// "none", "read", "write".
std::string_view access_name(Access a);

// Error codes, as they appear in replies.
namespace code {
inline constexpr std::string_view parse_error = "parse_error";          // not JSON
inline constexpr std::string_view invalid_request = "invalid_request";  // JSON, wrong shape
inline constexpr std::string_view unknown_method = "unknown_method";
inline constexpr std::string_view too_large = "too_large";
inline constexpr std::string_view forbidden = "forbidden";
inline constexpr std::string_view timeout = "timeout";
inline constexpr std::string_view busy = "busy";      // too many clients
inline constexpr std::string_view failed = "failed";  // the method ran and failed
}  // namespace code

class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string_view code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

struct Peer {
  int pid = -1;
  unsigned uid = ~0u;
  unsigned gid = ~0u;
  Access access = Access::none;
};

struct Request {
  nlohmann::json id;  // echoed in the reply; null when absent
  std::string method;
  nlohmann::json params = nlohmann::json::object();
};

struct MethodInfo {
  std::string_view name;
  Access needs;
  std::string_view summary;
};

// status, plan, verify, engine.status (read); apply, revert, reload,
// engine.start, engine.stop (write).
const std::vector<MethodInfo>& methods();
// Throws ProtocolError(unknown_method) naming the known methods.
Access access_needed(std::string_view method);

// One line, without its '\n'. Throws ProtocolError: parse_error, too_large,
// invalid_request (top level not an object, unknown keys, method missing or
// not a string, params not an object, id not string/number/null or too long,
// nested deeper than kMaxDepth), unknown_method.
Request parse_request(std::string_view line);
// The same; `id_seen` gets the request's id as soon as it is known valid, so
// an error reply to a request that got that far can still echo it.
Request parse_request(std::string_view line, nlohmann::json* id_seen);

// Reply lines, each ending in '\n'.
std::string ok_reply(const nlohmann::json& id, const nlohmann::json& result);
std::string error_reply(const nlohmann::json& id, std::string_view code, std::string_view message);

}  // namespace epyctune::control
