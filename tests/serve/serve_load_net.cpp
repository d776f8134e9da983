#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "serve_load.hpp"

namespace serve_load {

void Tally::streamed(int64_t n, double s, double ttft, double tpot) {
  std::lock_guard lk(mu);
  ++ok;
  tokens += n;
  latency_s.push_back(s);
  if (ttft >= 0) ttft_s.push_back(ttft);
  if (tpot >= 0) tpot_s.push_back(tpot);
}

int tcp_connect(const Target& t) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(t.port));
  if (::inet_pton(AF_INET, t.host == "localhost" ? "127.0.0.1" : t.host.c_str(), &a.sin_addr) !=
          1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

namespace {

// Token events in in[from..]: each `"text":"` not followed by `"`. from
// moves past what was counted but not past a marker a read may have cut.
int token_events(const std::string& in, size_t& from) {
  static const std::string marker = "\"text\":\"";
  int n = 0;
  size_t at = from, done = from;
  while ((at = in.find(marker, at)) != std::string::npos) {
    const size_t next = at + marker.size();
    if (next >= in.size()) {  // the text's first byte has not come yet
      from = at;
      return n;
    }
    if (in[next] != '"') ++n;
    at = done = next;
  }
  // A marker cut by the read's end has at most its length less one bytes.
  from = std::max(done, in.size() >= marker.size() ? in.size() - marker.size() + 1 : 0);
  return n;
}

}  // namespace

RawReply stream_once(const Target& t, const std::string& payload, int cancel_after) {
  RawReply r;
  const int fd = tcp_connect(t);
  if (fd < 0) return r;
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: " + t.host +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                          "Content-Length: " +
                          std::to_string(payload.size()) + "\r\n\r\n" + payload;
  const auto t0 = Clock::now();
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string in;
  char buf[16384];
  size_t scanned = 0;
  int events = 0;
  r.cancelled = cancel_after == 0;
  while (!r.cancelled) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (const int e = token_events(in, scanned); e > 0) {
      const double at = std::chrono::duration<double>(Clock::now() - t0).count();
      if (events == 0) r.ttft_s = at;
      r.last_token_s = at;
      events += e;
    }
    r.cancelled = cancel_after > 0 && events >= cancel_after;
  }
  ::close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0 && in.size() > 12) r.status = std::atoi(in.c_str() + 9);
  const size_t body_at = in.find("\r\n\r\n");
  if (body_at != std::string::npos) r.body = in.substr(body_at + 4);
  return r;
}

int raw_status(const Target& t, const std::string& request) {
  const int fd = tcp_connect(t);
  if (fd < 0) return 0;
  // The server may answer and close before it has read all we send: what it
  // answered is what counts, so a failed send is not an error here.
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  std::string in;
  char buf[4096];
  for (ssize_t n; in.size() < 12 && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    in.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return in.rfind("HTTP/1.1 ", 0) == 0 && in.size() >= 12 ? std::atoi(in.c_str() + 9) : 0;
}

int64_t completion_tokens_raw(const std::string& body) {
  const size_t at = body.rfind("\"usage\":");
  if (at == std::string::npos) return -1;
  const size_t start = body.rfind("data: ", at) + 6;
  const auto j =
      nlohmann::json::parse(body.substr(start, body.find("\n\n", start) - start), nullptr, false);
  return j.is_discarded() ? -1 : j["usage"].value("completion_tokens", int64_t{-1});
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace serve_load
