// `epyctune-engine serve` as a child process: started with --port 0, its
// "listening on http://HOST:PORT" line read back, stopped with SIGTERM and
// its exit status checked.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace epyctune::testing {

class ServeChild {
 public:
  // args: everything after `epyctune-engine serve` (--port 0 is added).
  ServeChild(const std::string& bin, std::vector<std::string> args) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    args.insert(args.begin(), {bin, "serve", "--port", "0"});
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      std::_Exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
    char line[512];
    if (!std::fgets(line, sizeof line, out_))
      throw std::runtime_error("serve exited before it listened");
    ready_line_ = line;
    const std::string prefix = "listening on http://";
    if (!ready_line_.starts_with(prefix))
      throw std::runtime_error("unexpected line: " + ready_line_);
    const auto colon = ready_line_.rfind(':');
    host_ = ready_line_.substr(prefix.size(), colon - prefix.size());
    port_ = std::stoi(ready_line_.substr(colon + 1));
  }
  ~ServeChild() {
    if (pid_ > 0) stop();
    if (out_) std::fclose(out_);
  }
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  const std::string& host() const { return host_; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& ready_line() const { return ready_line_; }

  // SIGTERM; the exit status (-1 when it had to be killed after 20 s).
  int stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 2000; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string ready_line_, host_;
  int port_ = 0;
};

}  // namespace epyctune::testing
