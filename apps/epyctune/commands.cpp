#include "apps/epyctune/commands.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "control/protocol.hpp"
#include "host/sysroot.hpp"

namespace epyctune::cli {

std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}

stack::Session open_session(const GlobalOptions& g, const std::string& profile,
                            const std::string& steps, bool force) {
  spdlog::info("host root {}{}", g.sysroot,
               g.topology_xml.empty() ? "" : ", topology from " + g.topology_xml);
  auto s = stack::open_session({g.sysroot, g.topology_xml, profile, steps, force});
  spdlog::info("profile {} from {}; topology from {}", s.profile.name, s.profile.source_file,
               s.topo.source);
  for (const auto& m : s.mismatches) spdlog::warn("profile/host mismatch (forced): {}", m);
  spdlog::info("{} knob(s) in {} step(s)", s.knobs.size(), s.steps.size());
  return s;
}

std::string daemon_socket(const GlobalOptions& g) {
  return host::Sysroot(g.sysroot).resolve(control::kSocketPath).string();
}

std::optional<control::Client> connect_daemon(const GlobalOptions& g) {
  const std::string path = daemon_socket(g);
  try {
    auto c = control::Client::connect(path, 5000);
    if (c)
      spdlog::info("epyctuned answers at {}: going through it", path);
    else
      spdlog::info("no epyctuned at {}: working directly", path);
    return c;
  } catch (const std::exception& e) {
    spdlog::warn("cannot reach epyctuned at {} ({}); working directly", path, e.what());
    return std::nullopt;
  }
}

int exit_code_for(const control::ProtocolError& e) {
  return e.code() == control::code::forbidden ? kExitPrivilege : kExitError;
}

std::string describe(const control::ProtocolError& e, const std::string& method) {
  return fmt::format("epyctuned refused '{}' ({}): {}", method, e.code(), e.what());
}

stack::KnobOutcome knob_outcome_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("epyctuned's result holds a knob that is no object");
  stack::KnobOutcome o;
  o.step = j.value("step", "");
  o.name = j.value("knob", "");
  o.path = j.value("path", "");
  std::string status = j.value("status", "");
  auto known = stack::knob_status_from_string(status);
  if (!known)
    throw std::runtime_error(
        fmt::format("epyctuned's result holds a knob status epyctune does not know: '{}'", status));
  o.status = *known;
  o.before = j.value("before", "");
  o.after = j.value("after", "");
  o.reason = j.value("reason", "");
  o.reboot_required = j.value("reboot_required", false);
  return o;
}

}  // namespace epyctune::cli
