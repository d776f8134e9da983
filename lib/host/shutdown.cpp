#include "host/shutdown.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <cstdlib>
#include <mutex>

#ifdef EPYCTUNE_HAVE_SYSTEMD
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>
#include <memory>
#endif

namespace epyctune::host {

bool is_shutting_down(const ManagerState& state) {
  if (state.system_state == "stopping") return true;
  static constexpr std::array<std::string_view, 6> kEnding = {
      "shutdown.target", "reboot.target", "halt.target",
      "poweroff.target", "kexec.target",  "soft-reboot.target"};
  for (const auto& job : state.jobs) {
    if (job.type != "start") continue;
    for (auto target : kEnding) {
      if (job.unit == target) return true;
    }
  }
  return false;
}

#ifdef EPYCTUNE_HAVE_SYSTEMD
namespace {

struct BusUnref {
  void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
};
struct MessageUnref {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using BusPtr = std::unique_ptr<sd_bus, BusUnref>;
using MessagePtr = std::unique_ptr<sd_bus_message, MessageUnref>;

constexpr const char* kDest = "org.freedesktop.systemd1";
constexpr const char* kPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";

std::string bus_error_text(const sd_bus_error& err, int r) {
  if (err.message != nullptr) return err.message;
  return std::strerror(-r);
}

std::optional<std::vector<QueuedJob>> list_jobs(sd_bus* bus) {
  sd_bus_error err = SD_BUS_ERROR_NULL;
  sd_bus_message* raw = nullptr;
  int r = sd_bus_call_method(bus, kDest, kPath, kManager, "ListJobs", &err, &raw, "");
  MessagePtr reply(raw);
  if (r < 0) {
    spdlog::debug("shutdown check: ListJobs failed: {}", bus_error_text(err, r));
    sd_bus_error_free(&err);
    return std::nullopt;
  }
  std::vector<QueuedJob> jobs;
  r = sd_bus_message_enter_container(reply.get(), SD_BUS_TYPE_ARRAY, "(usssoo)");
  while (r >= 0) {
    uint32_t id = 0;
    const char *unit = nullptr, *type = nullptr, *state = nullptr, *job = nullptr,
               *unit_path = nullptr;
    r = sd_bus_message_read(reply.get(), "(usssoo)", &id, &unit, &type, &state, &job, &unit_path);
    if (r <= 0) break;
    jobs.push_back({unit, type});
  }
  if (r < 0) {
    spdlog::debug("shutdown check: cannot parse ListJobs: {}", std::strerror(-r));
    return std::nullopt;
  }
  return jobs;
}

}  // namespace

std::optional<ManagerState> read_manager_state() {
  if (sd_booted() <= 0) {
    spdlog::debug("shutdown check: not booted with systemd");
    return std::nullopt;
  }
  sd_bus* raw_bus = nullptr;
  int r = sd_bus_open_system(&raw_bus);
  BusPtr bus(raw_bus);
  if (r < 0) {
    spdlog::debug("shutdown check: cannot connect to the system bus: {}", std::strerror(-r));
    return std::nullopt;
  }
  sd_bus_error err = SD_BUS_ERROR_NULL;
  char* value = nullptr;
  r = sd_bus_get_property_string(bus.get(), kDest, kPath, kManager, "SystemState", &err, &value);
  if (r < 0) {
    spdlog::debug("shutdown check: cannot read SystemState: {}", bus_error_text(err, r));
    sd_bus_error_free(&err);
    return std::nullopt;
  }
  ManagerState state;
  state.system_state = value;
  std::free(value);
  auto jobs = list_jobs(bus.get());
  if (!jobs) return std::nullopt;
  state.jobs = std::move(*jobs);
  return state;
}
#else
std::optional<ManagerState> read_manager_state() {
  spdlog::debug("shutdown check: unsupported: built without libsystemd");
  return std::nullopt;
}
#endif

namespace {

std::mutex g_source_mu;
ManagerStateSource g_source = read_manager_state;

}  // namespace

void set_manager_state_source(ManagerStateSource source) {
  std::lock_guard<std::mutex> lock(g_source_mu);
  g_source = source ? std::move(source) : ManagerStateSource(read_manager_state);
}

bool system_shutting_down() {
  ManagerStateSource source;
  {
    std::lock_guard<std::mutex> lock(g_source_mu);
    source = g_source;
  }
  return system_shutting_down(source);
}

bool system_shutting_down(const ManagerStateSource& source) {
  std::optional<ManagerState> state;
  try {
    state = source();
  } catch (const std::exception& e) {
    spdlog::debug("shutdown check: {}", e.what());
    return false;
  }
  if (!state) return false;
  bool down = is_shutting_down(*state);
  spdlog::debug("shutdown check: SystemState={}, {} queued job(s): {}", state->system_state,
                state->jobs.size(), down ? "shutting down" : "not shutting down");
  return down;
}

}  // namespace epyctune::host
