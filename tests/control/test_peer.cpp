// Peer credentials with a real non-root user: a child process becomes
// `nobody` (uid 65534, primary group nogroup on Debian) and talks to a server
// the test runs as root.
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/wait.h>

#include "control_test_util.hpp"

using namespace epyctune::control;
using namespace epyctune::testing;
using nlohmann::json;

namespace {

constexpr unsigned kNobody = 65534;

// nobody's primary group's name ("nogroup" on Debian), "" when unknown.
std::string nobody_group() {
  passwd* pw = ::getpwuid(kNobody);
  if (!pw) return "";
  group* gr = ::getgrgid(pw->pw_gid);
  return gr ? gr->gr_name : "";
}

// The replies `nobody` gets to status and apply, one per line. The child uses
// only system calls between fork and _exit: the server's threads live on in
// the parent's image.
std::vector<json> replies_as_nobody(const std::string& path) {
  const std::string requests =
      "{\"id\":1,\"method\":\"status\"}\n{\"id\":2,\"method\":\"apply\",\"params\":{}}\n";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)
      ::_exit(10);
    if (::getuid() != kNobody || ::setuid(0) == 0) ::_exit(11);  // really dropped
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(12);
    // The server may refuse (and close) before the requests are written: no
    // SIGPIPE, and its refusal is still read below.
    [[maybe_unused]] ssize_t w = ::send(fd, requests.data(), requests.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
      if (::write(pipefd[1], buf, static_cast<size_t>(n)) != n) ::_exit(14);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<json> replies;
  std::size_t pos = 0, nl;
  while ((nl = out.find('\n', pos)) != std::string::npos) {
    replies.push_back(json::parse(out.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return replies;
}

}  // namespace

TEST_CASE("peer credentials: access_for") {
  CHECK(Server::access_for(0, 0, "") == Access::write);
  CHECK(Server::access_for(0, 12345, "no-such-group-here") == Access::write);
  CHECK(Server::access_for(kNobody, kNobody, "") == Access::none);
  CHECK(Server::access_for(kNobody, kNobody, "no-such-group-here") == Access::none);
  std::string g = nobody_group();
  if (!g.empty()) {
    CHECK(Server::access_for(kNobody, kNobody, g) == Access::read);  // primary group
    CHECK(Server::access_for(kNobody, kNobody, "root") == Access::none);
  }
}

TEST_CASE("peer credentials: a non-root user outside the group is refused at connect") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to become nobody (the CI runs as root)");
    return;
  }
  ServerOptions o;
  o.read_group = "root";  // nobody is no member
  TestServer s(o);
  auto r = replies_as_nobody(s.path);
  // One refusal, before any request is read, and the connection is closed.
  REQUIRE(r.size() == 1);
  CHECK(r[0]["id"].is_null());
  CHECK(r[0]["error"]["code"] == "forbidden");
  CHECK(s.calls.load() == 0);
  // Root, in the same server, may do both.
  auto c = s.client();
  CHECK(c.call("status")["daemon"] == "test");
  CHECK(c.call("apply")["uid"] == 0);
}

namespace {

// `nobody` opens n connections and sends `request` on each (none when
// empty), then holds them open until release() while the test goes on.
// replies(): the first line each connection got within 2 s ("" for none).
class NobodyHolds {
 public:
  NobodyHolds(const std::string& path, int n, const std::string& request) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::pipe(out_) == 0);
    REQUIRE(::pipe(go_) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) child(addr, n, request);  // never returns
    ::close(out_[1]);
    ::close(go_[0]);
    char buf[4096];
    ssize_t k;
    std::string got;
    // The child writes its lines, then a lone "." line once all are read.
    while (got.find("\n.\n") == std::string::npos && (k = ::read(out_[0], buf, sizeof buf)) > 0)
      got.append(buf, static_cast<size_t>(k));
    std::size_t pos = 0, nl;
    while ((nl = got.find('\n', pos)) != std::string::npos) {
      std::string line = got.substr(pos, nl - pos);
      pos = nl + 1;
      if (line == ".") break;
      replies_.push_back(line == "-" ? json() : json::parse(line));
    }
  }
  ~NobodyHolds() { release(); }
  const std::vector<json>& replies() const { return replies_; }
  void release() {
    if (pid_ <= 0) return;
    ::close(go_[1]);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(out_[0]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    pid_ = -1;
  }

 private:
  // System calls only between fork and _exit: the server's threads live on
  // in the parent's image.
  [[noreturn]] void child(sockaddr_un addr, int n, const std::string& request) {
    ::close(out_[0]);
    ::close(go_[1]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)
      ::_exit(10);
    if (n > 64) ::_exit(11);
    // One connection at a time: a refusal (forbidden, busy) comes unasked
    // as the server accepts; only a connection that got none sends the
    // request, so nothing is written to a connection the server closed.
    int fds[64];
    for (int i = 0; i < n; ++i) {
      fds[i] = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (::connect(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(12);
      char line[4096];
      size_t len = 0;
      pollfd p{fds[i], POLLIN, 0};
      bool sent = false;
      for (;;) {
        const int wait_ms = sent ? 5000 : 500;
        if (::poll(&p, 1, wait_ms) != 1) {
          if (sent || request.empty()) break;
          if (::send(fds[i], request.data(), request.size(), MSG_NOSIGNAL) < 0) break;
          sent = true;
          continue;
        }
        ssize_t k = ::read(fds[i], line + len, 1);
        if (k <= 0 || line[len] == '\n' || len + 2 >= sizeof line) break;
        ++len;
      }
      if (len == 0) line[len++] = '-';
      line[len++] = '\n';
      if (::write(out_[1], line, len) != static_cast<ssize_t>(len)) ::_exit(13);
    }
    if (::write(out_[1], ".\n", 2) != 2) ::_exit(14);
    char c;
    while (::read(go_[0], &c, 1) > 0) {
    }
    ::_exit(0);
  }

  int out_[2]{-1, -1}, go_[2]{-1, -1};
  pid_t pid_ = -1;
  std::vector<json> replies_;
};

}  // namespace

TEST_CASE("peer credentials: connections without access take no slot from root") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to become nobody (the CI runs as root)");
    return;
  }
  ServerOptions o;
  o.read_group = "root";
  o.max_clients = 4;
  TestServer s(o);
  // Before the fix, 16 such connections held every slot as long as they liked.
  NobodyHolds held(s.path, 12, "");
  REQUIRE(held.replies().size() == 12);
  for (const auto& r : held.replies()) CHECK(r["error"]["code"] == "forbidden");
  std::vector<Client> root;
  for (int i = 0; i < 4; ++i) {
    root.push_back(s.client());
    CHECK(root.back().call("status")["daemon"] == "test");
  }
}

TEST_CASE("peer credentials: readers cannot take the slots kept for root") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to become nobody (the CI runs as root)");
    return;
  }
  std::string g = nobody_group();
  REQUIRE_MESSAGE(!g.empty(), "uid 65534 has no primary group in /etc/group");
  ServerOptions o;
  o.read_group = g;
  o.max_clients = 4;
  o.root_slots = 2;
  TestServer s(o);
  NobodyHolds held(s.path, 4, "{\"method\":\"status\"}\n");
  int ok = 0, busy = 0;
  for (const auto& r : held.replies()) {
    if (r.value("ok", false)) ++ok;
    if (!r.is_null() && r.contains("error") && r["error"]["code"] == "busy") ++busy;
  }
  CHECK(ok == 2);
  CHECK(busy == 2);
  // The reader's two connections stay open; root still gets both kept slots.
  auto a = s.client();
  auto b = s.client();
  CHECK(a.call("status")["daemon"] == "test");
  CHECK(b.call("status")["daemon"] == "test");
}

TEST_CASE("peer credentials: a member of the read group reads and may not write") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to become nobody (the CI runs as root)");
    return;
  }
  std::string g = nobody_group();
  REQUIRE_MESSAGE(!g.empty(), "uid 65534 has no primary group in /etc/group");
  ServerOptions o;
  o.read_group = g;
  TestServer s(o);
  auto r = replies_as_nobody(s.path);
  REQUIRE(r.size() == 2);
  CHECK(r[0]["ok"] == true);
  CHECK(r[0]["result"]["daemon"] == "test");
  CHECK(r[1]["error"]["code"] == "forbidden");
  CHECK(r[1]["error"]["message"].get<std::string>().find("write") != std::string::npos);
  CHECK(s.calls.load() == 1);
}
