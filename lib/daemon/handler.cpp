#include "daemon/handler.hpp"

#include <spdlog/spdlog.h>

namespace epyctune::daemon {

namespace {

// {"name": "..."} or {}; anything else is the caller's mistake.
std::string name_param(const control::Request& r) {
  for (const auto& [k, v] : r.params.items())
    if (k != "name")
      throw control::ProtocolError(control::code::invalid_request,
                                   r.method + ": unknown parameter '" + k + "' (only \"name\")");
  if (!r.params.contains("name")) return "";
  if (!r.params["name"].is_string())
    throw control::ProtocolError(control::code::invalid_request,
                                 r.method + ": \"name\" must be a string (an instance name)");
  return r.params["name"].get<std::string>();
}

// `epyctune apply`'s options; unknown keys and wrong types are refused.
ApplyRequest apply_params(const control::Request& r) {
  ApplyRequest a;
  for (const auto& [k, v] : r.params.items()) {
    auto bad = [&](const char* what) {
      return control::ProtocolError(control::code::invalid_request,
                                    "apply: \"" + k + "\" must be " + what);
    };
    if (k == "profile" || k == "steps") {
      if (!v.is_string()) throw bad("a string");
      (k == "profile" ? a.profile : a.steps) = v.get<std::string>();
    } else if (k == "check" || k == "keep_going" || k == "force") {
      if (!v.is_boolean()) throw bad("true or false");
      (k == "check" ? a.check : k == "keep_going" ? a.keep_going : a.force) = v.get<bool>();
    } else {
      throw control::ProtocolError(
          control::code::invalid_request,
          "apply: unknown parameter '" + k + "' (profile, steps, check, keep_going, force)");
    }
  }
  return a;
}

void no_params(const control::Request& r) {
  if (!r.params.empty())
    throw control::ProtocolError(control::code::invalid_request, r.method + " takes no parameters");
}

}  // namespace

control::Handler make_handler(Daemon& d) {
  return [&d](const control::Request& r, const control::Peer& peer) -> nlohmann::json {
    spdlog::debug("control: {} from pid {} uid {}", r.method, peer.pid, peer.uid);
    if (r.method == "status") return no_params(r), d.status();
    if (r.method == "plan") return no_params(r), d.plan();
    if (r.method == "verify") return no_params(r), d.verify(Trigger::request);
    if (r.method == "engine.status") return d.engine_status(name_param(r));
    if (control::access_needed(r.method) == control::Access::write)
      spdlog::info("control: {} by uid {} (pid {})", r.method, peer.uid, peer.pid);
    if (r.method == "apply") return d.apply(apply_params(r));
    if (r.method == "revert") return no_params(r), d.revert();
    if (r.method == "reload") return no_params(r), d.reload();
    if (r.method == "engine.start") return d.engine_start(name_param(r));
    if (r.method == "engine.stop") return d.engine_stop(name_param(r));
    throw control::ProtocolError(control::code::unknown_method, "unknown method " + r.method);
  };
}

}  // namespace epyctune::daemon
