#include "control/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/text.hpp"

namespace epyctune::control {
namespace {

std::string known_methods() {
  std::string s;
  for (const auto& m : methods()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

// A dump that never throws on invalid UTF-8 (a method name or a sysfs value
// echoed back): bad bytes become U+FFFD.
std::string dump_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string_view access_name(Access a) {
  switch (a) {
    case Access::none:
      return "none";
    case Access::read:
      return "read";
    case Access::write:
      return "write";
  }
  return "none";
}

const std::vector<MethodInfo>& methods() {
  static const std::vector<MethodInfo> table{
      {"status", Access::read, "the daemon, the applied profile, drift and engine instances"},
      {"plan", Access::read, "the plan of the configured profile against this host"},
      {"verify", Access::read, "read every knob back and report drift"},
      {"engine.status", Access::read, "the engine instances and where their threads run"},
      {"apply", Access::write, "apply a profile (journaled), as `epyctune apply`"},
      {"revert", Access::write, "restore every journaled value, as `epyctune revert`"},
      {"reload", Access::write, "re-read the configuration, as SIGHUP"},
      {"engine.start", Access::write, "start an engine instance (all when no name)"},
      {"engine.stop", Access::write, "stop an engine instance (all when no name)"},
  };
  return table;
}

Access access_needed(std::string_view method) {
  for (const auto& m : methods())
    if (m.name == method) return m.needs;
  // The name is echoed bounded: it came from a client.
  std::string shown(method.substr(0, 64));
  throw ProtocolError(code::unknown_method,
                      fmt::format("unknown method '{}{}'; known: {}", shown,
                                  method.size() > 64 ? "..." : "", known_methods()));
}

Request parse_request(std::string_view line) {
  return parse_request(line, nullptr);
}

Request parse_request(std::string_view line, nlohmann::json* id_seen) {
  if (line.size() > kMaxRequestBytes)
    throw ProtocolError(code::too_large, fmt::format("request of {} bytes; the limit is {}",
                                                     line.size(), kMaxRequestBytes));
  if (common::json_depth(line, kMaxDepth) > static_cast<size_t>(kMaxDepth))
    throw ProtocolError(code::invalid_request,
                        fmt::format("JSON nested deeper than {} levels", kMaxDepth));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number beyond a double (1e999) is out_of_range.
    throw ProtocolError(code::parse_error, fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object())
    throw ProtocolError(code::invalid_request,
                        fmt::format("a request is a JSON object, not {}", j.type_name()));
  Request r;
  if (auto it = j.find("id"); it != j.end()) {
    if (!it->is_string() && !it->is_number() && !it->is_null())
      throw ProtocolError(code::invalid_request, "\"id\" must be a string, a number or null");
    if (it->is_string() && it->get_ref<const std::string&>().size() > kMaxIdBytes)
      throw ProtocolError(code::invalid_request,
                          fmt::format("\"id\" longer than {} bytes", kMaxIdBytes));
    r.id = *it;
    if (id_seen) *id_seen = r.id;
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "id" && key != "method" && key != "params") {
      std::string shown = key.substr(0, 64);
      throw ProtocolError(
          code::invalid_request,
          fmt::format("unknown key \"{}\"; a request has only id, method and params", shown));
    }
  }
  auto m = j.find("method");
  if (m == j.end()) throw ProtocolError(code::invalid_request, "\"method\" is missing");
  if (!m->is_string()) throw ProtocolError(code::invalid_request, "\"method\" must be a string");
  r.method = m->get<std::string>();
  if (auto p = j.find("params"); p != j.end()) {
    if (!p->is_object()) throw ProtocolError(code::invalid_request, "\"params\" must be an object");
    r.params = std::move(*p);
  }
  access_needed(r.method);  // throws unknown_method
  return r;
}

std::string ok_reply(const nlohmann::json& id, const nlohmann::json& result) {
  return dump_line({{"id", id}, {"ok", true}, {"result", result}});
}

std::string error_reply(const nlohmann::json& id, std::string_view code, std::string_view message) {
  return dump_line({{"id", id}, {"ok", false}, {"error", {{"code", code}, {"message", message}}}});
}

}  // namespace epyctune::control
