// `epyctune profile show`: the effective profile after includes, as JSON with
// the TOML key names, or as TOML-like text with each key's origin.
#include <fmt/format.h>

#include "common/cpulist.hpp"
#include "profile/detect.hpp"

namespace epyctune::profile {

using nlohmann::json;

json profile_to_json(const Profile& p) {
  const Hardware& h = p.hardware;
  json extra = json::array();
  for (const auto& x : p.prefetch.extra)
    extra.push_back(
        {{"address", x.address}, {"mask", x.mask}, {"value", x.value}, {"reason", x.reason}});
  json origins = json::object();
  for (const auto& [k, o] : p.origins)
    origins[k] = fmt::format("{}:{}:{}", o.file, o.line, o.column);
  return json{
      {"name", p.name},
      {"aliases", p.aliases},
      {"description", p.description},
      {"source_file", p.source_file},
      {"includes", p.includes},
      {"hardware",
       {{"vendor", h.vendor},
        {"family", h.family},
        {"models", h.models},
        {"codename", h.codename},
        {"brand_contains", h.brand_contains},
        {"sockets", h.sockets},
        {"cores_per_socket", h.cores_per_socket},
        {"ccds_per_socket", h.ccds_per_socket},
        {"l3_domains_per_socket", h.l3_domains_per_socket},
        {"cores_per_l3", h.cores_per_l3},
        {"l3_mib", h.l3_bytes >> 20},
        {"memory_channels", h.memory_channels},
        {"memory_type", h.memory_type},
        {"memory_bandwidth_gbs", h.memory_bandwidth_gbs},
        {"nps_supported", h.nps_supported},
        {"notes", h.notes}}},
      {"partition",
       {{"draft_l3", p.partition.draft_l3},
        {"verify_l3", p.partition.verify_l3},
        {"housekeeping_cores", p.partition.housekeeping_cores},
        {"housekeeping_cpus", common::format_cpulist(p.partition.housekeeping_cpus)},
        {"use_smt_siblings", p.partition.use_smt_siblings}}},
      {"bios",
       {{"expect_nps", p.bios.expect_nps},
        {"smt", p.bios.smt},
        {"determinism", p.bios.determinism},
        {"boost", p.bios.boost}}},
      {"numa",
       {{"numa_balancing", p.numa.numa_balancing},
        {"thp", p.numa.thp},
        {"hugepages_2m_per_node",
         p.numa.hugepages_2m_per_node < 0 ? json("auto") : json(p.numa.hugepages_2m_per_node)},
        {"hugepages_1g_per_node", p.numa.hugepages_1g_per_node},
        {"model_gb", p.numa.model_gb},
        {"hugepage_headroom", p.numa.hugepage_headroom}}},
      {"isolation",
       {{"isolate", p.isolation.isolate},
        {"nohz_full", p.isolation.nohz_full},
        {"rcu_nocbs", p.isolation.rcu_nocbs},
        {"irq_affinity", p.isolation.irq_affinity},
        {"bootloader_dropin", p.isolation.bootloader_dropin}}},
      {"cat",
       {{"enabled", p.cat.enabled},
        {"draft_group", p.cat.draft_group},
        {"verify_group", p.cat.verify_group},
        {"draft_cbm", p.cat.draft_cbm},
        {"verify_cbm", p.cat.verify_cbm},
        {"default_cbm", p.cat.default_cbm}}},
      {"cpufreq",
       {{"governor", p.cpufreq.governor},
        {"draft_freq", p.cpufreq.draft_freq},
        {"verify_freq", p.cpufreq.verify_freq},
        {"epp", p.cpufreq.epp}}},
      {"prefetch",
       {{"enabled", p.prefetch.enabled},
        {"msr", p.prefetch.msr},
        {"mask", p.prefetch.mask},
        {"value", p.prefetch.value},
        {"cpus", p.prefetch.cpus},
        {"extra", extra}}},
      {"weights",
       {{"layout", p.weights.layout},
        {"hugepages", p.weights.hugepages},
        {"launch_config", p.weights.launch_config}}},
      {"spec",
       {{"draft_source", p.spec.draft_source},
        {"draft_len", p.spec.draft_len},
        {"draft_threads", p.spec.draft_threads},
        {"verify_threads", p.spec.verify_threads},
        {"launch_config", p.spec.launch_config}}},
      {"engine",
       {{"threads", p.engine.threads},
        {"draft_len", p.engine.draft_len},
        {"kv_type", p.engine.kv_type}}},
      {"expectations",
       {{"source", p.expectations_source},
        {"model", p.expectations_model},
        {"tok_s", p.expectations}}},
      {"origins", origins},
  };
}

std::string profile_to_text(const Profile& p) {
  json j = profile_to_json(p);
  std::string s = fmt::format("# {}: {}\n# from {}", p.name, p.description, p.source_file);
  for (const auto& inc : p.includes) s += fmt::format(", includes {}", inc);
  s += "\n";
  auto origin = [&](const std::string& key) {
    auto it = p.origins.find(key);
    return it == p.origins.end() ? std::string("(default)")
                                 : fmt::format("{}:{}", it->second.file, it->second.line);
  };
  if (!p.aliases.empty()) s += fmt::format("aliases = {}\n", j["aliases"].dump());
  for (const char* section : {"hardware", "partition", "bios", "numa", "isolation", "cat",
                              "cpufreq", "prefetch", "weights", "spec", "engine"}) {
    s += fmt::format("\n[{}]\n", section);
    for (const auto& [k, v] : j[section].items()) {
      if (k == "notes") continue;
      std::string val = v.dump();
      if ((k == "msr" || k == "mask" || k == "value") && v.is_number_unsigned())
        val = fmt::format("{:#x}", v.get<uint64_t>());
      std::string line = fmt::format("{} = {}", k, val);
      s += fmt::format("{:<44} # {}\n", line, origin(std::string(section) + "." + k));
    }
  }
  if (!p.hardware.notes.empty()) {
    s += "\n# Hardware notes:\n";
    for (const auto& n : p.hardware.notes) s += fmt::format("#  - {}\n", n);
  }
  s += fmt::format("\n[expectations]  # claims to compare with measurements; source: {}\n",
                   p.expectations_source.empty() ? "none given" : p.expectations_source);
  for (const auto& [k, v] : p.expectations)
    s += fmt::format("{} = {} tok/s{}\n", k, v,
                     p.expectations_model.empty() ? "" : " (" + p.expectations_model + ")");
  return s;
}

}  // namespace epyctune::profile
