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

nlohmann::json serving_load(const nlohmann::json& health) {
  auto number = [&](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key] : nlohmann::json();
  };
  nlohmann::json out = {{"active_sequences", number(health, "active_sequences")},
                        {"kv_blocks_used", number(health, "kv_blocks_used")},
                        {"kv_blocks_total", number(health, "kv_blocks_total")},
                        {"kv_block_tokens", number(health, "kv_block_tokens")},
                        {"kv_used_pct", nullptr},
                        {"parallel", number(health, "parallel")},
                        {"in_flight", nullptr},
                        {"queue_depth", nullptr}};
  if (health.contains("queue")) {
    out["in_flight"] = number(health["queue"], "in_flight");
    out["queue_depth"] = number(health["queue"], "depth");
  }
  const auto& used = out["kv_blocks_used"];
  const auto& total = out["kv_blocks_total"];
  if (used.is_number() && total.is_number() && total.get<double>() > 0)
    out["kv_used_pct"] = 100.0 * used.get<double>() / total.get<double>();
  return out;
}

void add_serving_load(nlohmann::json& status, int timeout_ms) {
  if (!status.contains("instances") || !status["instances"].is_array()) return;
  for (auto& i : status["instances"]) {
    if (!i.is_object() || i.value("state", "") != "running") continue;
    std::string host;
    int port = 0;
    const auto h = parse_ready_line("listening on " + i.value("url", ""), host, port)
                       ? get_health(host, port, timeout_ms)
                       : std::nullopt;
    i["serving"] = h ? serving_load(*h) : nlohmann::json();
  }
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
