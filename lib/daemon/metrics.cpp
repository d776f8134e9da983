#include "daemon/metrics.hpp"

#include "common/prometheus.hpp"

namespace epyctune::daemon {

std::string render_metrics(const stack::Checklist* last, size_t drifted_now,
                           const DaemonCounters& c, const std::vector<InstanceMetrics>& inst) {
  common::PromWriter w;
  // Before the first verify there is no checklist, and so no
  // epyctune_build_info: the daemon's own says which build runs.
  w.build_info("epyctuned_build_info", "The epyctuned build that wrote these metrics (always 1)");
  if (last) w.append(stack::render_checklist(*last, stack::ChecklistFormat::Prometheus));
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    w.single(name, "counter", help, double(v));
  };
  counter("epyctuned_verifies_total", "Verifies the daemon ran", c.verifies);
  counter("epyctuned_drift_events_total", "Verifies that found a knob drifted", c.drift_events);
  counter("epyctuned_drifted_knobs_total", "Knobs found drifted, summed over verifies",
          c.drifted_knobs);
  counter("epyctuned_repairs_total", "Knobs re-applied by drift repair", c.repairs);
  counter("epyctuned_repair_failures_total", "Drift repairs that failed", c.repair_failures);
  counter("epyctuned_reloads_total", "Config reloads that took effect", c.reloads);
  counter("epyctuned_reload_failures_total", "Config reloads refused (bad config)",
          c.reload_failures);
  w.single("epyctuned_drifted_knobs", "gauge", "Knobs that differed at the last verify",
           double(drifted_now));
  // engine_instance, not instance: Prometheus sets `instance` to the scrape
  // target (the host's node_exporter) and would rename ours exported_instance.
  if (!inst.empty()) {
    w.family("epyctuned_instance_up", "gauge", "1 when the engine instance serves");
    for (const auto& i : inst)
      w.sample("epyctuned_instance_up", i.up ? 1 : 0, {{"engine_instance", i.name}});
    w.family("epyctuned_instance_restarts_total", "counter", "Restarts of the engine instance");
    for (const auto& i : inst)
      w.sample("epyctuned_instance_restarts_total", double(i.restarts),
               {{"engine_instance", i.name}});
  }
  return w.take();
}

}  // namespace epyctune::daemon
