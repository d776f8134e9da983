#include "control/client.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "control/socket_util.hpp"

namespace epyctune::control {
namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds left before `deadline`, -1 (poll: forever) without one.
int remaining_ms(const std::optional<Clock::time_point>& deadline) {
  if (!deadline) return -1;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

[[noreturn]] void throw_closed(const std::string& method) {
  throw ProtocolError(
      code::failed, fmt::format("epyctuned closed the connection before replying to '{}'", method));
}

}  // namespace

std::optional<Client> Client::connect(const std::string& path, int timeout_ms) {
  sockaddr_un addr = unix_address(path);
  UniqueSocket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  // A Unix connect blocks only while the listener's backlog is full; the send
  // timeout bounds that wait.
  if (timeout_ms > 0) {
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  int rc;
  do {
    rc = ::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) return std::nullopt;
    if (e == EAGAIN || e == EINPROGRESS || e == ETIMEDOUT)
      throw ProtocolError(code::timeout, fmt::format("{}: epyctuned did not accept within {} ms",
                                                     path, timeout_ms));
    throw std::runtime_error(fmt::format("cannot connect to {}: {}", path, std::strerror(e)));
  }
  return Client(s.release());
}

Client::Client(int fd) : fd_(fd) {}

Client::Client(Client&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), next_id_(o.next_id_), pending_(std::move(o.pending_)) {}

Client& Client::operator=(Client&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    next_id_ = o.next_id_;
    pending_ = std::move(o.pending_);
  }
  return *this;
}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

void Client::send_line(const std::string& line, const std::string& method,
                       const std::optional<std::chrono::steady_clock::time_point>& deadline) {
  std::size_t sent = 0;
  while (sent < line.size()) {
    pollfd p{fd_, POLLOUT, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0)
      throw ProtocolError(code::timeout,
                          fmt::format("epyctuned did not take the '{}' request in time", method));
    ssize_t w = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent += static_cast<std::size_t>(w);
    } else if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET) throw_closed(method);
      throw std::runtime_error(fmt::format("control socket send: {}", std::strerror(errno)));
    }
  }
}

std::string Client::read_line(
    const std::string& method, int timeout_ms,
    const std::optional<std::chrono::steady_clock::time_point>& deadline) {
  char buf[65536];
  for (;;) {
    if (auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (pending_.size() > kMaxReplyBytes)
      throw ProtocolError(code::too_large, fmt::format("the reply to '{}' is longer than {} bytes",
                                                       method, kMaxReplyBytes));
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0)
      throw ProtocolError(code::timeout, fmt::format("no reply from epyctuned to '{}' within {} ms",
                                                     method, timeout_ms));
    ssize_t r = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      pending_.append(buf, static_cast<std::size_t>(r));
    } else if (r == 0) {
      // A reply whose final '\n' never came is still a reply (the busy
      // refusal is written and closed at once).
      if (!pending_.empty()) return std::exchange(pending_, {});
      throw_closed(method);
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET) throw_closed(method);
      throw std::runtime_error(fmt::format("control socket recv: {}", std::strerror(errno)));
    }
  }
}

nlohmann::json Client::call(const std::string& method, const nlohmann::json& params,
                            int timeout_ms) {
  if (fd_ < 0) throw std::logic_error("control::Client used after move");
  const long id = next_id_++;
  std::optional<Clock::time_point> deadline;
  if (timeout_ms > 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  nlohmann::json req{{"id", id}, {"method", method}, {"params", params}};
  try {
    send_line(req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", method,
              deadline);
  } catch (const ProtocolError& e) {
    // A daemon that refused the connection (busy) wrote why and closed before
    // reading the request: its reply is still there to read.
    if (e.code() != code::failed) throw;
  }
  std::string line = read_line(method, timeout_ms, deadline);

  nlohmann::json reply;
  try {
    reply = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw ProtocolError(code::parse_error,
                        fmt::format("epyctuned's reply to '{}' is not JSON: {}", method, e.what()));
  }
  auto bad = [&](const char* what) {
    return ProtocolError(code::invalid_request,
                         fmt::format("epyctuned's reply to '{}' {}", method, what));
  };
  if (!reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean())
    throw bad("has no boolean \"ok\"");
  const auto& rid = reply.contains("id") ? reply["id"] : nlohmann::json();
  if (reply["ok"].get<bool>()) {
    if (rid != nlohmann::json(id)) throw bad("answers another request (id mismatch)");
    if (!reply.contains("result")) throw bad("has no \"result\"");
    return reply["result"];
  }
  // An error may come before the request was read (busy, too_large): no id.
  if (!rid.is_null() && rid != nlohmann::json(id))
    throw bad("answers another request (id mismatch)");
  const auto& err = reply.contains("error") ? reply["error"] : nlohmann::json();
  if (!err.is_object() || !err.contains("code") || !err["code"].is_string())
    throw bad("has no error code");
  std::string message = err.contains("message") && err["message"].is_string()
                            ? err["message"].get<std::string>()
                            : std::string("(no message)");
  throw ProtocolError(err["code"].get<std::string>(), message);
}

}  // namespace epyctune::control
