#include "control/server.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "control/socket_util.hpp"

namespace epyctune::control {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Requests waiting for the handler thread; beyond this a request gets "busy".
constexpr std::size_t kMaxQueue = 32;

struct Conn {
  int fd = -1;
  Peer peer;
  std::string in, out;
  Clock::time_point last_activity, partial_since, out_since;
  bool has_partial = false;  // `in` holds the start of a line whose clock runs
  bool in_flight = false;    // a request of this connection is with the handler
  bool read_closed = false;  // the peer shut down its side (EOF)
  bool close_after_write = false;
  bool dead = false;

  bool wants_read() const {
    return !in_flight && out.empty() && !read_closed && !close_after_write;
  }
};

struct Job {
  std::uint64_t conn;
  Request request;
  Peer peer;
};

struct Done {
  std::uint64_t conn;
  std::string reply;
};

std::string peer_name(const Peer& p) {
  return fmt::format("pid {} uid {} gid {}", p.pid, p.uid, p.gid);
}

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  Handler handler;
  int listen_fd = -1;
  int wake_fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;

  std::thread poller, worker;
  std::atomic<bool> stopping{false};
  bool started = false;
  std::mutex stop_mu;

  std::mutex mu;  // guards jobs, done
  std::condition_variable cv;
  std::deque<Job> jobs;
  std::deque<Done> done;

  // Touched by the poll thread only.
  std::map<std::uint64_t, Conn> conns;
  std::uint64_t next_conn = 1;

  void wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
  }

  void poll_loop();
  void work_loop();
  void accept_all();
  void read_from(std::uint64_t id, Conn& c);
  void flush(std::uint64_t id, Conn& c);
  void process_lines(std::uint64_t id, Conn& c);
  void handle_line(std::uint64_t id, Conn& c, std::string_view line);
  void take_done();
  void serve(std::uint64_t id, Conn& c, short revents);
  void check_timers(std::uint64_t id, Conn& c, Clock::time_point now);
  int next_timeout_ms(Clock::time_point now) const;
  void reply_and_close(Conn& c, std::string reply) {
    c.out += reply;
    c.out_since = Clock::now();
    c.close_after_write = true;
  }
};

void Server::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
        spdlog::warn("control socket {}: accept: {}", opts.path, std::strerror(errno));
      return;
    }
    Peer p;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      p.pid = cred.pid;
      p.uid = cred.uid;
      p.gid = cred.gid;
      p.access = Server::access_for(p.uid, p.gid, opts.read_group);
    }
    auto refuse = [&](std::string_view code, const std::string& why) {
      const std::string r = error_reply(nullptr, code, why);
      [[maybe_unused]] auto n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      spdlog::info("control socket: refused {} ({})", peer_name(p), code);
    };
    if (p.access == Access::none) {
      refuse(code::forbidden,
             fmt::format("uid {} has no access to the daemon (root{}); nothing is served to it",
                         p.uid, opts.read_group.empty() ? "" : " or group " + opts.read_group));
      continue;
    }
    const auto cap = static_cast<std::size_t>(std::max(0, opts.max_clients));
    const auto others_cap =
        static_cast<std::size_t>(std::max(0, opts.max_clients - std::max(0, opts.root_slots)));
    const auto others = static_cast<std::size_t>(std::count_if(
        conns.begin(), conns.end(), [](const auto& kv) { return kv.second.peer.uid != 0; }));
    if (conns.size() >= cap || (p.uid != 0 && others >= others_cap)) {
      refuse(code::busy, fmt::format("too many clients (the limit is {}, {} of them kept for "
                                     "root); try again",
                                     opts.max_clients, opts.max_clients - others_cap));
      continue;
    }
    Conn c;
    c.fd = fd;
    c.peer = p;
    c.last_activity = Clock::now();
    spdlog::debug("control socket: connection from {} ({} access)", peer_name(p),
                  access_name(p.access));
    conns.emplace(next_conn++, std::move(c));
  }
}

void Server::Impl::read_from(std::uint64_t id, Conn& c) {
  char buf[4096];
  // Reads until the kernel has nothing more or the buffer passes the bound;
  // process_lines() refuses an over-long line.
  while (c.wants_read() && c.in.size() <= kMaxRequestBytes) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (c.in.empty()) c.has_partial = false;
      c.in.append(buf, static_cast<std::size_t>(n));
      process_lines(id, c);
      continue;
    }
    if (n == 0) {
      c.read_closed = true;
      process_lines(id, c);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    return;
  }
}

void Server::Impl::process_lines(std::uint64_t id, Conn& c) {
  // One request at a time per connection, and no new one while a reply is
  // unsent: a client that never reads its replies stops being read.
  while (!c.in_flight && c.out.empty() && !c.close_after_write && !c.dead) {
    auto nl = c.in.find('\n');
    std::string line;
    if (nl != std::string::npos) {
      line = c.in.substr(0, nl);
      c.in.erase(0, nl + 1);
    } else if (c.in.size() > kMaxRequestBytes) {
      reply_and_close(
          c, error_reply(nullptr, code::too_large,
                         fmt::format("request line longer than {} bytes", kMaxRequestBytes)));
      c.in.clear();
      return;
    } else if (c.read_closed && !c.in.empty()) {
      line = std::move(c.in);  // the last line may lack its '\n'
      c.in.clear();
    } else {
      break;
    }
    c.has_partial = false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;  // blank lines are no requests
    if (line.size() > kMaxRequestBytes) {
      reply_and_close(c, error_reply(nullptr, code::too_large,
                                     fmt::format("request line of {} bytes; the limit is {}",
                                                 line.size(), kMaxRequestBytes)));
      c.in.clear();
      return;
    }
    handle_line(id, c, line);
  }
  if (!c.in.empty() && !c.has_partial) {
    c.has_partial = true;
    c.partial_since = Clock::now();
  }
  if (c.read_closed && c.in.empty() && !c.in_flight && c.out.empty()) c.dead = true;
}

void Server::Impl::handle_line(std::uint64_t id, Conn& c, std::string_view line) {
  c.last_activity = Clock::now();  // a whole request: the one thing that renews the idle clock
  nlohmann::json req_id;
  Request req;
  try {
    req = parse_request(line, &req_id);
  } catch (const ProtocolError& e) {
    c.out += error_reply(req_id, e.code(), e.what());
    c.out_since = Clock::now();
    if (e.code() == code::too_large) c.close_after_write = true;
    return;
  } catch (const std::exception& e) {
    // A parser bug must cost one connection, not the daemon.
    spdlog::error("control socket: request from {} broke the parser: {}", peer_name(c.peer),
                  e.what());
    reply_and_close(c, error_reply(req_id, code::parse_error, e.what()));
    return;
  }
  Access needs = access_needed(req.method);
  if (static_cast<int>(c.peer.access) < static_cast<int>(needs)) {
    spdlog::info("control socket: '{}' refused to {} ({} access)", req.method, peer_name(c.peer),
                 access_name(c.peer.access));
    std::string who =
        needs == Access::write
            ? "root"
            : (opts.read_group.empty() ? "root" : fmt::format("root or group {}", opts.read_group));
    c.out +=
        error_reply(req.id, code::forbidden,
                    fmt::format("'{}' needs {} access ({}); uid {} has {}", req.method,
                                access_name(needs), who, c.peer.uid, access_name(c.peer.access)));
    c.out_since = Clock::now();
    return;
  }
  std::lock_guard lk(mu);
  if (jobs.size() >= kMaxQueue) {
    c.out += error_reply(req.id, code::busy, "the daemon's request queue is full; try again");
    c.out_since = Clock::now();
    return;
  }
  jobs.push_back(Job{id, std::move(req), c.peer});
  c.in_flight = true;
  cv.notify_one();
}

void Server::Impl::flush(std::uint64_t id, Conn& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      c.out_since = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // EPIPE, ECONNRESET: the client left
    return;
  }
  if (c.close_after_write)
    c.dead = true;
  else
    process_lines(id, c);  // lines that waited for this reply to go out
}

void Server::Impl::take_done() {
  std::deque<Done> ready;
  {
    std::lock_guard lk(mu);
    ready.swap(done);
  }
  for (auto& d : ready) {
    auto it = conns.find(d.conn);
    if (it == conns.end()) continue;  // the client left while its request ran
    Conn& c = it->second;
    c.in_flight = false;
    c.out += d.reply;
    c.out_since = c.last_activity = Clock::now();
    flush(it->first, c);
  }
}

void Server::Impl::check_timers(std::uint64_t id, Conn& c, Clock::time_point now) {
  auto older = [&](Clock::time_point t, int ms) { return ms > 0 && now - t >= milliseconds(ms); };
  if (c.in_flight) return;  // the handler's time is not the client's fault
  if (!c.out.empty()) {
    if (older(c.out_since, opts.request_timeout_ms)) {
      spdlog::debug("control socket: {} does not read its reply; closed", peer_name(c.peer));
      c.dead = true;
    }
    return;
  }
  if (c.has_partial && older(c.partial_since, opts.request_timeout_ms)) {
    reply_and_close(c, error_reply(nullptr, code::timeout,
                                   fmt::format("no complete request line within {} ms",
                                               opts.request_timeout_ms)));
    c.in.clear();
    flush(id, c);
    return;
  }
  if (c.in.empty() && older(c.last_activity, opts.idle_timeout_ms)) c.dead = true;
}

int Server::Impl::next_timeout_ms(Clock::time_point now) const {
  auto best = now + milliseconds(1000);
  auto consider = [&](Clock::time_point t, int ms) {
    if (ms > 0) best = std::min(best, t + milliseconds(ms));
  };
  for (const auto& [id, c] : conns) {
    if (c.in_flight) continue;
    if (!c.out.empty())
      consider(c.out_since, opts.request_timeout_ms);
    else if (c.has_partial)
      consider(c.partial_since, opts.request_timeout_ms);
    else
      consider(c.last_activity, opts.idle_timeout_ms);
  }
  auto ms = std::chrono::duration_cast<milliseconds>(best - now).count();
  return static_cast<int>(std::clamp<long long>(ms + 1, 0, 1000));
}

void Server::Impl::serve(std::uint64_t id, Conn& c, short re) {
  try {
    if (re & POLLOUT) flush(id, c);
    if ((re & (POLLIN | POLLHUP | POLLERR)) && c.wants_read()) read_from(id, c);
    if (!c.out.empty() && !c.dead) flush(id, c);
    // Hung up and nothing left to read: its reply, queued or running, has
    // nobody to go to (POLLHUP is reported whether asked for or not).
    if ((re & (POLLHUP | POLLERR | POLLNVAL)) && !c.wants_read()) c.dead = true;
  } catch (const std::exception& e) {
    // Out of memory or a bug: this connection ends, the daemon goes on.
    spdlog::error("control socket: dropping {}: {}", peer_name(c.peer), e.what());
    c.dead = true;
  }
}

void Server::Impl::poll_loop() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (!stopping.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    fds.push_back({listen_fd, POLLIN, 0});
    for (const auto& [id, c] : conns) {
      short ev = 0;
      if (c.wants_read()) ev |= POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), next_timeout_ms(Clock::now()));
    if (n < 0 && errno != EINTR) {
      spdlog::error("control socket {}: poll: {}", opts.path, std::strerror(errno));
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    if (stopping.load()) break;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_fd, &v, sizeof v);
    }
    take_done();
    for (std::size_t i = 0; n > 0 && i < ids.size(); ++i) {
      auto it = conns.find(ids[i]);
      if (it == conns.end()) continue;
      Conn& c = it->second;
      short re = fds[i + 2].revents;
      if (re) serve(it->first, c, re);
    }
    auto now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      check_timers(it->first, it->second, now);
      if (it->second.dead) {
        ::close(it->second.fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    // After the dead are gone: a slot freed this round is free for these.
    if (n > 0 && (fds[1].revents & POLLIN)) accept_all();
  }
  for (auto& [id, c] : conns) ::close(c.fd);
  conns.clear();
}

void Server::Impl::work_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return stopping.load() || !jobs.empty(); });
      if (stopping.load()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    std::string reply;
    try {
      reply = ok_reply(job.request.id, handler(job.request, job.peer));
    } catch (const ProtocolError& e) {
      reply = error_reply(job.request.id, e.code(), e.what());
    } catch (const std::exception& e) {
      reply = error_reply(job.request.id, code::failed, e.what());
    } catch (...) {
      reply = error_reply(job.request.id, code::failed, "the method failed (unknown error)");
    }
    {
      std::lock_guard lk(mu);
      done.push_back(Done{job.conn, std::move(reply)});
    }
    wake();
  }
}

Server::Server(ServerOptions opts, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  const std::string& path = impl_->opts.path;
  sockaddr_un addr = unix_address(path);  // throws on a path too long

  namespace fs = std::filesystem;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::exists(parent)) {
    fs::create_directories(parent);
    fs::permissions(parent, fs::perms(0755));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw std::runtime_error(
          fmt::format("{} exists and is not a socket; remove it or choose another sysroot", path));
    UniqueSocket probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
      throw std::runtime_error(
          fmt::format("another epyctuned already listens on {}; stop it first", path));
    if (errno != ECONNREFUSED)
      throw std::runtime_error(fmt::format("{}: {}", path, std::strerror(errno)));
    spdlog::info("control socket: removing the stale socket {}", path);
    ::unlink(path.c_str());
  }

  UniqueSocket ls(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (ls.fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  if (::bind(ls.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error(fmt::format("bind {}: {}", path, std::strerror(errno)));
  // Anyone may connect; each request is checked against SO_PEERCRED.
  ::chmod(path.c_str(), 0666);
  if (::listen(ls.fd, 64) != 0) {
    int e = errno;
    ::unlink(path.c_str());
    throw std::runtime_error(fmt::format("listen {}: {}", path, std::strerror(e)));
  }
  if (::stat(path.c_str(), &st) == 0) {
    impl_->dev = st.st_dev;
    impl_->ino = st.st_ino;
  }
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->wake_fd < 0) {
    ::unlink(path.c_str());
    throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
  }
  impl_->listen_fd = ls.release();
}

Server::~Server() {
  stop();
  ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
  // Only our own socket: a successor may have bound the path meanwhile.
  struct stat st {};
  if (::stat(impl_->opts.path.c_str(), &st) == 0 && st.st_dev == impl_->dev &&
      st.st_ino == impl_->ino)
    ::unlink(impl_->opts.path.c_str());
}

void Server::start() {
  std::lock_guard lk(impl_->stop_mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->worker = std::thread([this] { impl_->work_loop(); });
  impl_->poller = std::thread([this] { impl_->poll_loop(); });
}

void Server::stop() {
  std::lock_guard lk(impl_->stop_mu);
  {
    std::lock_guard qlk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->wake();
  auto self = std::this_thread::get_id();
  if (impl_->poller.joinable() && impl_->poller.get_id() != self) impl_->poller.join();
  if (impl_->worker.joinable() && impl_->worker.get_id() != self) impl_->worker.join();
}

const std::string& Server::path() const {
  return impl_->opts.path;
}

Access Server::access_for(unsigned uid, unsigned gid, const std::string& read_group) {
  if (uid == 0) return Access::write;
  if (read_group.empty()) return Access::none;
  std::vector<char> buf(16384);
  group grp{};
  group* gr = nullptr;
  if (::getgrnam_r(read_group.c_str(), &grp, buf.data(), buf.size(), &gr) != 0 || !gr)
    return Access::none;
  const gid_t want = gr->gr_gid;
  if (gid == want) return Access::read;
  std::vector<char> pbuf(16384);
  passwd pw{};
  passwd* p = nullptr;
  if (::getpwuid_r(uid, &pw, pbuf.data(), pbuf.size(), &p) != 0 || !p) return Access::none;
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (::getgrouplist(p->pw_name, p->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(p->pw_name, p->pw_gid, groups.data(), &n) < 0) return Access::none;
  }
  groups.resize(static_cast<std::size_t>(n));
  return std::find(groups.begin(), groups.end(), want) != groups.end() ? Access::read
                                                                       : Access::none;
}

}  // namespace epyctune::control
