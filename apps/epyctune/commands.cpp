#include "apps/epyctune/commands.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>

#include "common/cpulist.hpp"
#include "common/text_table.hpp"
#include "control/protocol.hpp"
#include "host/sysroot.hpp"

namespace epyctune::cli {

std::vector<RegisterFn>& registry() {
  static std::vector<RegisterFn> fns;
  return fns;
}

stack::TextOptions text_options(const GlobalOptions& g, bool changed_only, int fd) {
  return {g.verbose > 0, changed_only, fd >= 0 && common::colour_for(fd)};
}

std::string instance_cpus(const nlohmann::json& i) {
  auto text = [&](const char* k) {
    return i.contains(k) && i[k].is_string() ? i[k].get<std::string>() : std::string();
  };
  if (i.contains("threads") && i["threads"].is_array() && !i["threads"].empty()) {
    std::set<int> cpus;
    try {
      for (const auto& t : i["threads"])
        if (t.is_object() && t.contains("cpus") && t["cpus"].is_string())
          for (int c : common::parse_cpulist(t["cpus"].get<std::string>())) cpus.insert(c);
      if (!cpus.empty()) return common::format_cpulist({cpus.begin(), cpus.end()});
    } catch (const std::invalid_argument& e) {
      spdlog::warn("an instance's thread CPUs do not parse: {}", e.what());
    }
  }
  return !text("host_cpus").empty() ? text("host_cpus") : text("cpus");
}

void add_json_options(CLI::App* cmd, bool& json, const std::string& help) {
  auto* flag = cmd->add_flag("--json", json, help);
  cmd->add_option_function<std::string>(
         "--format", [&json](const std::string& f) { json = f == "json"; },
         "text (the default) or json; --format json is --json")
      ->check(CLI::IsMember({"text", "json"}))
      ->type_name("text|json")
      ->excludes(flag);
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
