#include "daemon/metrics.hpp"

#include <fmt/format.h>

namespace epyctune::daemon {

namespace {
std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

void counter(std::string& out, const char* name, const char* help, uint64_t v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
}
}  // namespace

std::string render_metrics(const stack::Checklist* last, size_t drifted_now,
                           const DaemonCounters& c, const std::vector<InstanceMetrics>& inst) {
  std::string out;
  if (last) out += stack::render_checklist(*last, stack::ChecklistFormat::Prometheus);
  counter(out, "epyctuned_verifies_total", "Verifies the daemon ran", c.verifies);
  counter(out, "epyctuned_drift_events_total", "Verifies that found a knob drifted",
          c.drift_events);
  counter(out, "epyctuned_drifted_knobs_total", "Knobs found drifted, summed over verifies",
          c.drifted_knobs);
  counter(out, "epyctuned_repairs_total", "Knobs re-applied by drift repair", c.repairs);
  counter(out, "epyctuned_repair_failures_total", "Drift repairs that failed", c.repair_failures);
  counter(out, "epyctuned_reloads_total", "Config reloads that took effect", c.reloads);
  counter(out, "epyctuned_reload_failures_total", "Config reloads refused (bad config)",
          c.reload_failures);
  out += fmt::format(
      "# HELP epyctuned_drifted_knobs Knobs that differed at the last verify\n"
      "# TYPE epyctuned_drifted_knobs gauge\nepyctuned_drifted_knobs {}\n",
      drifted_now);
  if (!inst.empty()) {
    out +=
        "# HELP epyctuned_instance_up 1 when the engine instance serves\n"
        "# TYPE epyctuned_instance_up gauge\n";
    for (const auto& i : inst)
      out += fmt::format("epyctuned_instance_up{{instance=\"{}\"}} {}\n", escape(i.name),
                         i.up ? 1 : 0);
    out +=
        "# HELP epyctuned_instance_restarts_total Restarts of the engine instance\n"
        "# TYPE epyctuned_instance_restarts_total counter\n";
    for (const auto& i : inst)
      out += fmt::format("epyctuned_instance_restarts_total{{instance=\"{}\"}} {}\n",
                         escape(i.name), i.restarts);
  }
  return out;
}

}  // namespace epyctune::daemon
