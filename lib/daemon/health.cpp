#include "daemon/health.hpp"

#include <httplib.h>

#include <charconv>

namespace epyctune::daemon {

std::optional<nlohmann::json> get_health(const std::string& host, int port, int timeout_ms) {
  httplib::Client cli(host, port);
  const auto sec = timeout_ms / 1000, usec = (timeout_ms % 1000) * 1000;
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
  auto res = cli.Get("/health");
  if (!res || res->status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

bool parse_ready_line(const std::string& line, std::string& host, int& port) {
  static const std::string prefix = "listening on http://";
  auto at = line.find(prefix);
  if (at == std::string::npos) return false;
  std::string rest = line.substr(at + prefix.size());
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r' || rest.back() == '/'))
    rest.pop_back();
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  int p = 0;
  auto [ptr, ec] = std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), p);
  if (ec != std::errc() || ptr != rest.data() + rest.size() || p <= 0 || p > 65535) return false;
  host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  port = p;
  return true;
}

}  // namespace epyctune::daemon
