// Peer credentials with a real non-root user: a child process becomes
// `nobody` (uid 65534, primary group nogroup on Debian) and talks to a server
// the test runs as root.
#include <grp.h>
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
    if (::write(fd, requests.data(), requests.size()) != static_cast<ssize_t>(requests.size()))
      ::_exit(13);
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

TEST_CASE("peer credentials: a non-root user outside the group is refused everything") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to become nobody (the CI runs as root)");
    return;
  }
  ServerOptions o;
  o.read_group = "root";  // nobody is no member
  TestServer s(o);
  auto r = replies_as_nobody(s.path);
  REQUIRE(r.size() == 2);
  CHECK(r[0]["id"] == 1);
  CHECK(r[0]["error"]["code"] == "forbidden");
  CHECK(r[1]["id"] == 2);
  CHECK(r[1]["error"]["code"] == "forbidden");
  CHECK(s.calls.load() == 0);
  // Root, in the same server, may do both.
  auto c = s.client();
  CHECK(c.call("status")["daemon"] == "test");
  CHECK(c.call("apply")["uid"] == 0);
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
