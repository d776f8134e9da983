// Runs epyctuned as a child process on a fixture, the way systemd would: its
// log in a file, sd_notify messages caught on a socket of our own, signals
// sent by pid, and the control socket asked through control::Client.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/client.hpp"
#include "test_util.hpp"

namespace epyctune::testing {

// Polls `pred` every 100 ms until it holds or `timeout_s` passed.
inline bool eventually(const std::function<bool()>& pred, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// A TCP port nobody listens on right now.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~NotifySocket() { ::close(fd_); }
  const std::filesystem::path& path() const { return path_; }
  // Every message received so far, appended to `all`.
  const std::string& poll_messages(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, timeout_ms) > 0) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) all_ += std::string(buf, static_cast<size_t>(n)) + "\n";
      timeout_ms = 0;
    }
    return all_;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string all_;
};

class DaemonProcess {
 public:
  DaemonProcess(const std::vector<std::string>& args, const std::filesystem::path& log,
                const std::vector<std::string>& env)
      : log_(log) {
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv{const_cast<char*>(EPYCTUNED_BIN)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(EPYCTUNED_BIN, argv.data());
      ::_exit(127);
    }
  }
  ~DaemonProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ::kill(pid_, sig); }
  bool alive() {
    if (exited_) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      exited_ = true;
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    return !exited_;
  }
  // The exit code, or -1 when it did not exit within timeout_s.
  int wait(double timeout_s) {
    eventually([this] { return !alive(); }, timeout_s);
    return exited_ ? code_ : -1;
  }
  std::string log() const { return read_file(log_); }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

inline nlohmann::json call(const std::string& socket, const std::string& method,
                           const nlohmann::json& params = nlohmann::json::object()) {
  auto c = control::Client::connect(socket, 5000);
  REQUIRE_MESSAGE(c.has_value(), "no daemon listens on " << socket);
  return c->call(method, params, 60000);
}

}  // namespace epyctune::testing
