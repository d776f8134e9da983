// The CLI's side of the control socket: one connection, one call at a time.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "control/protocol.hpp"

namespace epyctune::control {

class Client {
 public:
  // nullopt when no daemon listens at `path` (no file, ECONNREFUSED,
  // ENOENT); throws std::runtime_error for anything else (EACCES...).
  static std::optional<Client> connect(const std::string& path, int timeout_ms = 5000);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  // Sends one request and waits for its reply. Returns the result on
  // "ok": true; throws ProtocolError with the reply's code and message
  // otherwise, ProtocolError(timeout) when no reply comes within
  // `timeout_ms` (apply and revert may take minutes: pass a longer one, or
  // 0 to wait without limit). A connection the daemon closes without a reply
  // is ProtocolError(failed); a reply that is not the protocol's,
  // ProtocolError(parse_error or invalid_request).
  nlohmann::json call(const std::string& method,
                      const nlohmann::json& params = nlohmann::json::object(),
                      int timeout_ms = 5000);

 private:
  explicit Client(int fd);
  void send_line(const std::string& line, const std::string& method,
                 const std::optional<std::chrono::steady_clock::time_point>& deadline);
  std::string read_line(const std::string& method, int timeout_ms,
                        const std::optional<std::chrono::steady_clock::time_point>& deadline);
  int fd_ = -1;
  long next_id_ = 1;
  std::string pending_;  // bytes read past the last reply line
};

}  // namespace epyctune::control
