#include "bench/engine_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "bench/interrupt.hpp"

namespace epyctune::bench {

namespace {
std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) {
  g_signal.store(sig);
}
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll/waitpid return EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}
bool interrupted() {
  return g_signal.load() != 0;
}
int interrupt_signal() {
  return g_signal.load();
}

std::filesystem::path find_engine(const std::filesystem::path& self) {
  if (const char* e = std::getenv("EPYCTUNE_ENGINE"); e && *e) return e;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (const auto& dir : {exe.parent_path(), self.parent_path()}) {
    if (dir.empty()) continue;
    auto p = dir / "epyctune-engine";
    if (::access(p.c_str(), X_OK) == 0) return p;
    // The build tree keeps each app in its own folder.
    auto q = dir.parent_path() / "epyctune-engine" / "epyctune-engine";
    if (::access(q.c_str(), X_OK) == 0) return q;
  }
  return "epyctune-engine";
}

ProcessResult run_process(const std::vector<std::string>& argv, bool passthrough) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!passthrough && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0))
    throw EngineError(std::string("cannot create pipes: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) throw EngineError(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // The child leaves our signal handlers behind with exec; a terminal's
    // Ctrl-C reaches it too, and we stop it ourselves otherwise.
    if (!passthrough) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ProcessResult r;
  bool killed = false;
  auto stop_child = [&] {
    if (!killed) ::kill(pid, SIGTERM), killed = true;
  };
  if (!passthrough) {
    ::close(out[1]);
    ::close(err[1]);
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
      if (interrupted()) stop_child();
      int n = ::poll(fds, 2, 200);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t k = ::read(fds[i].fd, buf, sizeof buf);
        if (k > 0) {
          (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(k));
        } else if (k == 0 || errno != EINTR) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
    }
  }
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) {
      if (interrupted()) stop_child();
      continue;
    }
    throw EngineError(std::string("waitpid failed: ") + std::strerror(errno));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (interrupted())
    throw Interrupted(fmt::format("signal {} arrived while the engine ran", interrupt_signal()));
  return r;
}

Sample sample_from_generate_json(const nlohmann::json& j, int block) {
  Sample s;
  try {
    const auto& t = j.at("timings");
    s.tok_s = t.at("tok_s").get<double>();
    s.block_tok_s = block_rates(t.at("per_token_ms").get<std::vector<double>>(), block);
    s.bytes_per_token = j.value("bytes_per_token", 0.0);
    const auto& sp = j.at("spec");
    const double passes = sp.value("target_passes", 0.0);
    const double generated = static_cast<double>(j.at("tokens").size());
    if (sp.value("enabled", false) && passes > 0) s.tokens_per_pass = generated / passes;
    const auto& c = j.at("cpus");
    s.cpus = sp.value("enabled", false) && !c.value("draft", std::string()).empty()
                 ? fmt::format("draft {} + verify {}", c.value("draft", std::string()),
                               c.value("verify", std::string()))
                 : c.value("shared", std::string());
    if (s.cpus.empty()) s.cpus = c.value("verify", std::string());
    if (j.contains("launch") && j["launch"].is_object()) {
      s.note = j["launch"].value("cpu_note", std::string());
      s.engine_launch = j["launch"];
    }
  } catch (const nlohmann::json::exception& e) {
    throw EngineError(std::string("unexpected JSON from the engine: ") + e.what());
  }
  return s;
}

}  // namespace epyctune::bench
