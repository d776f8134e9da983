// `epyctune engine status|start|stop [--name NAME] [--json]`: the engine
// instances epyctuned supervises (docs/control-socket.md). Talks to the
// daemon only: without one there are no instances to speak of.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "apps/epyctune/commands.hpp"
#include "common/text_table.hpp"

namespace epyctune::cli {
namespace {

struct EngineArgs {
  std::string name;
  bool json = false;
};

std::string field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// What a running instance's /health said of its load (the daemon adds it as
// "serving"): active sequences, and KV blocks used/total with the share.
// "-" where the engine does not report it (before the paged KV pool) or did
// not answer.
std::string active_of(const nlohmann::json& i) {
  const auto* s = i.contains("serving") ? &i["serving"] : nullptr;
  if (!s || !s->is_object() || !s->contains("active_sequences") ||
      !(*s)["active_sequences"].is_number())
    return "-";
  return (*s)["active_sequences"].dump();
}

std::string kv_of(const nlohmann::json& i) {
  const auto* s = i.contains("serving") ? &i["serving"] : nullptr;
  if (!s || !s->is_object()) return "-";
  const auto used = s->value("kv_blocks_used", nlohmann::json());
  const auto total = s->value("kv_blocks_total", nlohmann::json());
  if (!used.is_number() || !total.is_number()) return "-";
  const double t = total.get<double>();
  return fmt::format("{}/{} ({:.0f}%)", used.dump(), total.dump(),
                     t > 0 ? 100.0 * used.get<double>() / t : 0.0);
}

// One row per instance under a header; CPUS is where it runs now (its
// threads' affinity), PLAN the CPUs its launch plan gave it, ACTIVE and KV
// its load.
void print_instances(const nlohmann::json& result) {
  const auto& list = result.contains("instances") && result["instances"].is_array()
                         ? result["instances"]
                         : nlohmann::json::array();
  if (list.empty()) {
    fmt::print("no engine instances configured\n");
    return;
  }
  common::TextTable t;
  t.row({"NAME", "STATE", "PID", "CPUS", "PLAN", "THREADS", "ACTIVE", "KV", "URL"});
  std::vector<std::string> errors;
  for (const auto& i : list) {
    if (!i.is_object()) continue;
    std::string state = field(i, "state");
    auto tone = state == "running"                        ? common::Tone::good
                : state == "failed" || state == "backoff" ? common::Tone::bad
                                                          : common::Tone::plain;
    std::string threads =
        i.contains("threads") && i["threads"].is_array() ? std::to_string(i["threads"].size()) : "";
    t.row({field(i, "name"),
           {state, tone},
           field(i, "pid"),
           instance_cpus(i),
           field(i, "cpus"),
           threads,
           state == "running" ? active_of(i) : "",
           state == "running" ? kv_of(i) : "",
           field(i, "url")});
    if (!field(i, "last_error").empty())
      errors.push_back(fmt::format("{}: last error: {}", field(i, "name"), field(i, "last_error")));
  }
  fmt::print("{}", t.render(common::colour_for(STDOUT_FILENO)));
  for (const auto& e : errors) fmt::print("{}\n", e);
}

int run_engine(const std::string& action, const EngineArgs& a, const GlobalOptions& g) {
  const std::string method = "engine." + action;
  auto d = connect_daemon(g);
  if (!d) {
    fmt::print(stderr, "epyctune engine {}: epyctuned is not running (no socket at {})\n", action,
               daemon_socket(g));
    return kExitError;
  }
  nlohmann::json params = nlohmann::json::object();
  if (!a.name.empty()) params["name"] = a.name;
  try {
    auto result =
        d->call(method, params, action == "status" ? kDaemonReadTimeoutMs : kDaemonWriteTimeoutMs);
    if (a.json)
      fmt::print("{}\n", result.dump(2));
    else
      print_instances(result);
    return kExitOk;
  } catch (const control::ProtocolError& e) {
    fmt::print(stderr, "epyctune engine {}: {}\n", action, describe(e, method));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epyctune engine {}: {}\n", action, e.what());
    return kExitError;
  }
}

void add_engine_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand(
      "engine",
      "The engine instances epyctuned supervises: status, start, stop (needs the daemon)");
  cmd->require_subcommand(1);
  struct Action {
    const char* name;
    const char* help;
  };
  for (auto [name, help] : {Action{"status",
                                   "Each instance: state, pid, CPUs, threads, active sequences, "
                                   "KV use, URL"},
                            Action{"start", "Start an instance (every one without --name)"},
                            Action{"stop", "Stop an instance (every one without --name)"}}) {
    auto args = std::make_shared<EngineArgs>();
    auto* sub = cmd->add_subcommand(name, help);
    sub->add_option("--name", args->name, "One instance, by its name in the daemon's config");
    add_json_options(sub, args->json, "The daemon's reply as JSON");
    std::string action = name;
    sub->callback(
        [args, action, &global] { global.exit_code = run_engine(action, *args, global); });
  }
}

static Registrar reg(&add_engine_command);

}  // namespace
}  // namespace epyctune::cli
