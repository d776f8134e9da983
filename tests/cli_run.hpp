// Runs a CLI binary the way a user does and captures what it said: for the
// suites that test `epyctune` and `epyctune-engine` end to end.
#pragma once

#include <doctest/doctest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace epyctune::testing {

struct CliRun {
  int code = -1;
  std::string out, err;
};

namespace detail {
inline std::string drain(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  // A pty's master reads EIO once the child has gone: that is its end of file.
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) s.append(buf, static_cast<size_t>(n));
  close(fd);
  return s;
}
inline int wait_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
[[noreturn]] inline void exec(const char* bin, const std::vector<std::string>& args,
                              const std::string& env) {
  if (!env.empty()) putenv(const_cast<char*>(env.c_str()));
  std::vector<char*> argv{const_cast<char*>(bin)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(bin, argv.data());
  _exit(127);
}
}  // namespace detail

// stdout and stderr apart, through pipes (neither is a terminal).
inline CliRun run_cli(const char* bin, const std::vector<std::string>& args,
                      const std::string& env = "") {
  int out[2], err[2];
  REQUIRE(pipe(out) == 0);
  REQUIRE(pipe(err) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    detail::exec(bin, args, env);
  }
  close(out[1]);
  close(err[1]);
  CliRun r;
  r.out = detail::drain(out[0]);  // outputs here are far below the pipe buffer for stderr
  r.err = detail::drain(err[0]);
  r.code = detail::wait_code(pid);
  return r;
}

// On a pseudo-terminal, as in an interactive shell: everything lands in `out`.
// `env` ("NAME=value") is set in the child, as for run_cli.
inline CliRun run_cli_on_tty(const char* bin, const std::vector<std::string>& args,
                             const std::string& env = "") {
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) detail::exec(bin, args, env);
  CliRun r;
  r.out = detail::drain(master);
  r.code = detail::wait_code(pid);
  return r;
}

}  // namespace epyctune::testing
