// Step 2: NUMA policy (automatic balancing off, transparent hugepage mode) and
// per-node hugepage reservations sized for the model.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "profile/resolve.hpp"
#include "stack/steps.hpp"

namespace epyctune::stack {

namespace {

constexpr const char* kStep = "numa";

std::vector<int> inference_nodes(const StepContext& ctx) {
  std::vector<int> nodes = ctx.part.draft.nodes;
  nodes.insert(nodes.end(), ctx.part.verify.nodes.begin(), ctx.part.verify.nodes.end());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

uint64_t node_memory(const StepContext& ctx, int node) {
  for (const auto& n : ctx.topo.numa_nodes)
    if (n.os_index == node) return n.memory_bytes;
  return 0;
}

void add_hugepages(const StepContext& ctx, std::vector<Knob>& knobs, uint64_t page_kb,
                   int64_t per_node, const std::string& field) {
  std::string size = page_kb == 2048 ? "2M" : "1G";
  for (int node : inference_nodes(ctx)) {
    std::string dir =
        fmt::format("/sys/devices/system/node/node{}/hugepages/hugepages-{}kB", node, page_kb);
    std::string name = fmt::format("node{} {} hugepages", node, size);
    if (!ctx.sys.is_dir(dir)) {
      knobs.push_back(unsupported_knob(
          kStep, name, dir,
          fmt::format("{} pages are not available on node {} (no {}): {}", size, node, dir,
                      page_kb == 2048 ? "kernel without hugetlbfs"
                                      : "boot with hugepagesz=1G, or the CPU lacks pdpe1gb")));
      continue;
    }
    uint64_t bytes = static_cast<uint64_t>(per_node) * page_kb * 1024;
    uint64_t mem = node_memory(ctx, node);
    if (mem > 0 && bytes > mem / 10 * 9) {
      knobs.push_back(unsupported_knob(
          kStep, name, dir,
          fmt::format("profile {} asks {} x {} pages = {:.1f} GiB on node {}, which has only "
                      "{:.1f} GiB: lower it or set numa.model_gb",
                      field, per_node, size, bytes / 1073741824.0, node, mem / 1073741824.0)));
      continue;
    }
    auto k = value_knob(kStep, name, dir + "/nr_hugepages", Canon::Int, std::to_string(per_node));
    k.mismatch_hint = fmt::format(
        "the kernel reserved fewer {} pages than asked on node {} (memory there is in use or "
        "fragmented): free memory and apply again, or reserve at boot with hugepagesz={} "
        "hugepages={}",
        size, node, size, per_node * static_cast<int64_t>(inference_nodes(ctx).size()));
    knobs.push_back(std::move(k));
  }
}

std::vector<Knob> build(const StepContext& ctx) {
  const auto& n = ctx.profile.numa;
  std::vector<Knob> knobs;
  knobs.push_back(value_knob(kStep, "numa_balancing", "/proc/sys/kernel/numa_balancing", Canon::Int,
                             n.numa_balancing ? "1" : "0"));
  if (n.thp != "keep")
    knobs.push_back(value_knob(kStep, "transparent hugepages",
                               "/sys/kernel/mm/transparent_hugepage/enabled", Canon::Choice,
                               n.thp));
  int64_t per_node = n.hugepages_2m_per_node;
  auto nodes = inference_nodes(ctx);
  if (!ctx.partition_error.empty()) {
    knobs.push_back(unsupported_knob(kStep, "hugepages", "/sys/devices/system/node",
                                     "sized per inference node, but the profile's partition "
                                     "does not fit this host: " +
                                         ctx.partition_error));
    return knobs;
  }
  if (per_node < 0) {
    if (n.model_gb <= 0 || nodes.empty()) {
      auto k = check_knob(kStep, "2M hugepages", "hugepages-2M", "not reserved", "not reserved",
                          "numa.hugepages_2m_per_node is auto and numa.model_gb is 0: set the "
                          "model size to reserve hugepages for it");
      k.informational = true;
      knobs.push_back(std::move(k));
      per_node = 0;
    } else {
      // The weights are spread over the inference nodes; headroom covers the KV cache.
      per_node = profile::auto_hugepages_2m_per_node(n, static_cast<int>(nodes.size()));
    }
  }
  if (per_node > 0) add_hugepages(ctx, knobs, 2048, per_node, "numa.hugepages_2m_per_node");
  if (n.hugepages_1g_per_node > 0)
    add_hugepages(ctx, knobs, 1048576, n.hugepages_1g_per_node, "numa.hugepages_1g_per_node");
  return knobs;
}

// Hugepages must leave the node room to run: at most 90% of its memory.
void check_host(const profile::NumaStep& n, const profile::Profile&, const profile::CheckHost& h,
                profile::Checker& c) {
  if (!h.topo) return;
  const host::Topology& t = *h.topo;
  int cpu_nodes = 0;
  for (const auto& node : t.numa_nodes) cpu_nodes += node.cpus.empty() ? 0 : 1;
  uint64_t per_node_2m =
      n.hugepages_2m_per_node >= 0
          ? static_cast<uint64_t>(n.hugepages_2m_per_node) << 21
          : static_cast<uint64_t>(profile::auto_hugepages_2m_per_node(n, cpu_nodes)) << 21;
  uint64_t need = per_node_2m + (static_cast<uint64_t>(n.hugepages_1g_per_node) << 30);
  for (const auto& node : t.numa_nodes) {
    if (node.cpus.empty() || node.memory_bytes == 0) continue;
    if (need > node.memory_bytes / 10 * 9) {
      std::string key =
          n.hugepages_2m_per_node >= 0 ? "numa.hugepages_2m_per_node" : "numa.model_gb";
      if (n.hugepages_1g_per_node > 0 && per_node_2m < need / 2) key = "numa.hugepages_1g_per_node";
      c.error(
          key,
          fmt::format("hugepages need {:.1f} GiB per node but node {} has {:.1f} GiB (at most 90% "
                      "may be reserved)",
                      static_cast<double>(need) / (1ull << 30), node.os_index,
                      static_cast<double>(node.memory_bytes) / (1ull << 30)),
          "reserve fewer pages, or a smaller model_gb for \"auto\"");
      break;
    }
  }
}

profile::Section section() {
  using profile::KeyReader;
  using profile::NumaStep;
  profile::Keys<NumaStep> k;
  k.flag("numa_balancing", &NumaStep::numa_balancing)
      .choice("thp", &NumaStep::thp, {"always", "madvise", "never", "keep"})
      .custom(
          "hugepages_2m_per_node",
          [](KeyReader& r, const char* key, NumaStep& n) {
            if (auto word = r.if_string(key)) {
              if (*word == "auto")
                n.hugepages_2m_per_node = -1;
              else
                r.error(key, r.dotted(key) + " must be \"auto\" or a page count",
                        "e.g. hugepages_2m_per_node = 2048 (4 GiB per node)");
            } else {
              r.get_int(key, n.hugepages_2m_per_node, 0, int64_t{1} << 30);
            }
          },
          [](const NumaStep& n) {
            return n.hugepages_2m_per_node < 0 ? nlohmann::json("auto")
                                               : nlohmann::json(n.hugepages_2m_per_node);
          })
      .integer("hugepages_1g_per_node", &NumaStep::hugepages_1g_per_node, 0, 1 << 20)
      .number("model_gb", &NumaStep::model_gb, 0, 4096)
      .number("hugepage_headroom", &NumaStep::hugepage_headroom, 1.0, 4.0);
  return profile::section_of(kStep, profile::field(&profile::Profile::numa), k, {}, check_host);
}

// Host-wide knobs (balancing, THP) need no partition; the hugepages, sized
// per inference node, say themselves when it does not fit.
const StepRegistrar registrar({
    .number = 2,
    .name = kStep,
    .title = "NUMA policy and hugepages",
    .section = section(),
    .build = build,
});

}  // namespace

}  // namespace epyctune::stack
