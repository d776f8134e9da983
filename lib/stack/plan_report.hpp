// `epyctune plan` output: the partition (per L3 domain: role, node, CPUs) and,
// per step, every knob's current value, desired value and status. The JSON
// form is stable and documented in docs/json/stack.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stack/plan.hpp"
#include "stack/session.hpp"
#include "stack/text_report.hpp"

namespace epyctune::stack {

// {
//   "schema_version": 1, "profile": "epyc-9754", "host": {source, brand, vendor, family, model,
//   sockets,
//     numa_nodes, l3_domains, cores, cpus}, "mismatches": [...],
//   "partition": {draft_cpus, verify_cpus, housekeeping_cpus, idle_sibling_cpus (CPU-list
//     strings), draft_nodes, verify_nodes (int arrays),
//     domains: [{index, cache_id, socket, node, role: draft|verify|housekeeping,
//                cpus, draft_cpus, verify_cpus, housekeeping_cpus}]},
//   "steps": [{number, name, title, knobs: [{knob, kind, path, current, desired,
//              status: unchanged|change|unsupported|manual|pending-reboot|info, reason}]}],
//   "summary": {"unchanged": n, "change": n, ...}
// }
nlohmann::json plan_to_json(const Session& s, const std::vector<KnobPlan>& plans);
// Human text: per-CPU rows folded into CPU lists unless o.per_cpu, and a
// last line that says what to run next.
std::string plan_to_text(const Session& s, const std::vector<KnobPlan>& plans,
                         const TextOptions& o = {});

}  // namespace epyctune::stack
