#include "profile/generate_sections.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include "common/cpulist.hpp"
#include "common/text.hpp"
#include "profile/resolve.hpp"

namespace epyctune::profile::detail {

using common::format_cpulist;

void TomlOut::kv(const std::string& key, const std::string& literal, const std::string& why) {
  std::string line = key + " = " + literal;
  out_ += why.empty() ? line + "\n" : fmt::format("{:<28} # {}\n", line, why);
}

// A TOML basic string; the input is one line of text already (brand strings
// from an XML are cleaned by clean()).
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Printable ASCII only, at most max bytes: a brand from an XML can hold anything.
std::string clean(std::string_view s, size_t max) {
  std::string out;
  for (char c : s)
    if (out.size() < max) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return common::trim(out);
}

std::string ints(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30);
}

std::string model_what(const ModelSize& m, uint64_t fallback, const char* what) {
  std::string_view role(what);
  role = role.substr(role.rfind(' ') + 1);  // "target", "draft"
  if (!m.path.empty())
    return fmt::format("the {} {} ({:.2f} GB)", role, clean(m.path, 160),
                       static_cast<double>(m.bytes) / 1e9);
  return fmt::format("the default {} ({:.1f} GB)", what, fallback / 1e9);
}

namespace {

std::string domains_text(const host::Topology& t, const std::vector<int>& doms) {
  std::vector<int> cores;
  for (int d : doms)
    for (int c : t.l3_domains[static_cast<size_t>(d)].cores) cores.push_back(c);
  std::sort(cores.begin(), cores.end());
  return fmt::format("L3 domain(s) {}: cores {}", format_cpulist(doms), format_cpulist(cores));
}

std::string max_freq(const GenHost& h, const std::vector<int>& cpus) {
  if (!h.facts.sys || cpus.empty()) return "";
  auto v = h.facts.sys->read_value(
      fmt::format("/sys/devices/system/cpu/cpu{}/cpufreq/cpuinfo_max_freq", cpus.front()));
  if (!v) return "";
  try {
    return fmt::format(" (cpu{} cpuinfo_max_freq {} MHz)", cpus.front(), std::stoll(*v) / 1000);
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

void hardware_section(TomlOut& o, const GenHost& h) {
  const auto& t = h.t;
  const auto& cpu = t.cpu;
  int cps = t.n_cores() / t.sockets;
  int l3ps = static_cast<int>(t.l3_domains.size()) / t.sockets;
  o.section("hardware");
  o.kv("vendor", toml_string(cpu.vendor), "CPUID vendor");
  if (cpu.family) {
    o.kv("family", std::to_string(cpu.family),
         fmt::format("{:X}h: {}, identity from {}", cpu.family, h.gen.name, cpu.source));
    o.kv("models", ints({cpu.model}), fmt::format("{:X}h: this host's CPUID model", cpu.model));
  } else {
    o.comment("family, models: unknown (the topology carries no CPUID numbers and the brand");
    o.comment("names no known part), so any family and model match");
  }
  if (!cpu.codename.empty())
    o.kv("codename", toml_string(cpu.codename), "from family and model, for display");
  if (auto part = detail::part_number(cpu.brand); !part.empty())
    o.kv("brand_contains", toml_string(part),
         fmt::format("the part in the brand \"{}\"; ranks, never decides", clean(cpu.brand)));
  o.kv("sockets", std::to_string(t.sockets), "packages in the topology");
  o.kv("cores_per_socket", std::to_string(cps),
       fmt::format("{} cores / {} socket(s)", t.n_cores(), t.sockets));
  o.kv("ccds_per_socket", std::to_string(l3ps / h.l3_per_ccd),
       fmt::format("{} L3 domain(s) per {}", h.l3_per_ccd, h.gen.ccd_word));
  o.kv("l3_domains_per_socket", std::to_string(l3ps),
       fmt::format("{} L3 caches / {} socket(s)", t.l3_domains.size(), t.sockets));
  std::set<size_t> per_l3;
  for (const auto& d : t.l3_domains) per_l3.insert(d.cores.size());
  if (per_l3.size() == 1 && static_cast<int>(*per_l3.begin()) * l3ps == cps)
    o.kv("cores_per_l3", std::to_string(*per_l3.begin()), "every L3 domain has this many cores");
  else
    o.comment(fmt::format("cores_per_l3 not set: the L3 domains hold {} to {} cores",
                          *per_l3.begin(), *per_l3.rbegin()));
  o.kv("l3_mib", std::to_string(h.l3_bytes >> 20), "the L3 of one domain, as the host reports it");
  if (auto mem = detail::memory_platform(cpu)) {
    o.kv("memory_channels", std::to_string(mem->channels),
         fmt::format("per socket, {}; fewer if DIMM slots are empty", mem->why));
    o.kv("memory_type", toml_string(mem->type), "the platform's fastest supported speed");
    o.kv("memory_bandwidth_gbs", fmt::format("{:.1f}", mem->bandwidth_gbs()),
         fmt::format("{} x {} MT/s x 8 B: theoretical peak per socket", mem->channels, mem->mts));
  } else {
    o.comment("memory_channels, memory_type, memory_bandwidth_gbs not set: the part's memory");
    o.comment("platform is not known from its identity");
  }
  int nps = t.nodes_per_socket();
  if (nps == 0 || nps == 1 || nps == 2 || nps == 4)
    o.kv("nps_supported", "[1, 2, 4]", "the NPS modes EPYC firmware offers");
  else
    o.kv("nps_supported", ints({1, 2, 4, nps}),
         fmt::format("EPYC firmware's NPS modes, and the {} nodes per socket this host runs", nps));
  std::vector<std::string> notes = {
      h.gen.layout,
      fmt::format("Generated from the detected topology: {} socket(s), {} L3 domain(s) of {} MiB, "
                  "{} cores, {} thread(s) per core, {} NUMA node(s).",
                  t.sockets, t.l3_domains.size(), h.l3_bytes >> 20, t.n_cores(), t.threads_per_core,
                  t.numa_nodes.size())};
  if (!h.gen.prefetch_control)
    notes.push_back(h.gen.name +
                    " has no PrefetchControl MSR (CPUID Fn8000_0021 EAX[13] clear): the prefetch "
                    "step is off.");
  if (cpu.family == 0x1A)
    notes.push_back(
        "Zen 5's PrefetchControl resets to 0x3C0: bits 6-9 are undocumented fields, so only the "
        "five documented prefetcher bits (mask 0x2F) are written, read-modify-write.");
  o.comment("Facts about this part that are easy to get wrong, and where the values came from.");
  o.raw("notes = [\n");
  for (const auto& n : notes) o.raw("  " + toml_string(n) + ",\n");
  o.raw("]\n");
}

void partition_section(TomlOut& o, const GenHost& h) {
  const auto& t = h.t;
  std::vector<int> verify;
  for (const auto& d : t.l3_domains)
    if (std::find(h.draft.begin(), h.draft.end(), d.index) == h.draft.end())
      verify.push_back(d.index);
  o.section("partition");
  o.comment(fmt::format("draft: {}", domains_text(t, h.draft)));
  o.comment(h.draft_why);
  o.kv("draft_l3", ints(h.draft), "socket 0's first L3 domain(s)");
  o.kv("verify_l3", "[]",
       fmt::format("every other domain: {} (the target streams its weights: it "
                   "wants all the bandwidth it can get)",
                   format_cpulist(verify)));
  std::vector<int> hk_cpus;
  for (int c : h.housekeeping) {
    const auto& cpus = t.cores[static_cast<size_t>(c)].cpus;
    hk_cpus.insert(hk_cpus.end(), cpus.begin(), cpus.end());
  }
  std::sort(hk_cpus.begin(), hk_cpus.end());
  o.kv("housekeeping_cores", ints(h.housekeeping),
       fmt::format("CPUs {}: one core per 64 of each socket, the socket's first; core 0 keeps the "
                   "boot CPU's timekeeping",
                   format_cpulist(hk_cpus)));
  o.kv("use_smt_siblings", "false",
       t.threads_per_core > 1
           ? "one inference thread per core: decode is memory-bound, a sibling adds no bandwidth"
           : "SMT is off on this host; one thread per core either way");
}

void bios_section(TomlOut& o, const GenHost& h) {
  int nps = h.t.nodes_per_socket();
  o.section("bios");
  o.kv("expect_nps", std::to_string(nps),
       nps == 0 ? "one NUMA node spans the sockets (NPS0, or a topology export without NUMA "
                  "information): the check keeps it so"
                : fmt::format("this host runs NPS{} ({} node(s) over {} socket(s)); the check "
                              "keeps it so",
                              nps, h.t.numa_nodes.size(), h.t.sockets));
  o.kv("smt", "\"off\"",
       h.t.threads_per_core > 1
           ? fmt::format("{} threads per core now; runtime smt/control, nothing gained for "
                         "memory-bound decode",
                         h.t.threads_per_core)
           : "already off on this host: keep it off");
  o.kv("determinism", "\"performance\"", "a check only: performance determinism lets cores boost");
  o.kv("boost", "\"on\"", "decode on few cores and the draft both gain from boost");
}

void numa_section(TomlOut& o, const GenHost& h) {
  const auto& t = h.t;
  int cpu_nodes = 0;
  uint64_t smallest = 0;
  for (const auto& n : t.numa_nodes)
    if (!n.cpus.empty()) {
      ++cpu_nodes;
      if (n.memory_bytes && (!smallest || n.memory_bytes < smallest)) smallest = n.memory_bytes;
    }
  // GiB, rounded up to 0.1: what numa.model_gb means.
  double model_gb = std::ceil(gib(h.target_bytes + h.draft_bytes) * 10.0) / 10.0;
  NumaStep n;
  n.model_gb = model_gb;
  int64_t pages = auto_hugepages_2m_per_node(n, cpu_nodes);
  uint64_t need = static_cast<uint64_t>(pages) << 21;
  if (smallest && need > smallest / 10 * 9)
    throw GenerateError(fmt::format(
        "the models need {:.1f} GiB of 2 MB hugepages on each of the {} NUMA node(s), but the "
        "smallest node has {:.1f} GiB (at most 90% may be reserved): give smaller models "
        "(--model, --model-draft), or set numa.model_gb by hand",
        gib(need), cpu_nodes, gib(smallest)));
  o.section("numa");
  o.kv("numa_balancing", "false", "page migration fights explicit placement");
  o.kv("thp", "\"madvise\"", "huge pages where the engine asks, not everywhere");
  o.kv("hugepages_2m_per_node", "\"auto\"",
       fmt::format("model_gb x headroom over {} node(s): {} pages ({:.2f} GiB) per node here",
                   cpu_nodes, pages, gib(need)));
  o.kv("hugepages_1g_per_node", "0", "1 GB pages must be reserved at boot; 2 MB pages suffice");
  o.kv("model_gb", fmt::format("{:.1f}", model_gb),
       fmt::format("GiB: {} + {}", model_what(h.opt.target, kDefaultTargetBytes, "7B Q4_0 target"),
                   model_what(h.opt.draft, kDefaultDraftBytes, "1B Q4_0 draft")));
  o.kv("hugepage_headroom", "1.10", "10% for the KV cache and alignment");
}

void isolation_section(TomlOut& o) {
  o.section("isolation");
  o.kv("isolate", "true", "isolcpus=managed_irq,domain: the scheduler keeps off draft and verify");
  o.kv("nohz_full", "true", "no scheduler tick on a CPU running one inference thread");
  o.kv("rcu_nocbs", "true", "RCU callbacks run on the housekeeping CPUs");
  o.kv("irq_affinity", "true", "movable IRQs to the housekeeping CPUs");
  o.kv("bootloader_dropin", "\"/etc/default/grub.d/epyctune.cfg\"",
       "the boot parameters go here, never into grub.cfg");
}

// The root group (housekeeping, everything else) keeps a quarter of the ways
// on the inference domains, the draft the rest: the OS cannot evict the
// draft's working set, and cannot be starved of cache either.
void cat_section(TomlOut& o, const GenHost& h) {
  o.section("cat");
  const auto& l3 = h.facts.l3cat;
  auto groups = [&] {
    o.kv("draft_group", "\"epyctune-draft\"", "resctrl group of the draft's threads");
    o.kv("verify_group", "\"epyctune-verify\"", "resctrl group of the target's threads");
  };
  auto masks = [&](const std::string& d, const std::string& v, const std::string& def,
                   const std::string& why) {
    o.comment(why);
    o.kv("draft_cbm", toml_string(d), "");
    o.kv("verify_cbm", toml_string(v), "");
    o.kv("default_cbm", toml_string(def), "");
  };
  if (!l3) {
    o.kv("enabled", "true", "a topology XML says nothing of resctrl; the cat step checks the host");
    groups();
    masks("all", "all", "all",
          "no resctrl rules in a topology XML: no way masks (\"all\"); generate on the host itself "
          "(--sysroot or live) for masks from its cbm_mask");
    return;
  }
  std::string off_why;
  if (!l3->present)
    off_why = h.facts.capabilities && !h.facts.capabilities->resctrl.reason.empty()
                  ? h.facts.capabilities->resctrl.reason
                  : "no L3 CAT on this host (no sys/fs/resctrl/info/L3)";
  else if (!l3->error.empty())
    off_why = "resctrl is unreadable: " + l3->error;
  else if (l3->num_closids < 3)
    off_why = fmt::format("{} CLOSIDs; the cat step needs 3", l3->num_closids);
  if (!off_why.empty()) {
    o.kv("enabled", "false", clean(off_why, 200));
    groups();
    return;
  }
  o.kv("enabled", "true", "this host has L3 CAT (resctrl)");
  groups();
  int ways = std::popcount(l3->cbm_mask);
  int keep = std::max(l3->min_cbm_bits, ways / 4);
  if (ways - keep < l3->min_cbm_bits) {
    masks("all", "all", "all",
          fmt::format("cbm_mask {:x} has {} ways: too few to split (min_cbm_bits {})", l3->cbm_mask,
                      ways, l3->min_cbm_bits));
    return;
  }
  uint64_t low = 0;
  for (int bit = 0, taken = 0; bit < 64 && taken < keep; ++bit)
    if (l3->cbm_mask >> bit & 1) {
      low |= uint64_t{1} << bit;
      ++taken;
    }
  int width = static_cast<int>((std::bit_width(l3->cbm_mask) + 3) / 4);
  masks(fmt::format("{:0{}x}", l3->cbm_mask & ~low, width), "all",
        fmt::format("{:0{}x}", low, width),
        fmt::format("cbm_mask {:0{}x}: {} ways; the root group (OS, housekeeping) keeps {} on the "
                    "inference domains, the draft the other {}, verify all of its own domains",
                    l3->cbm_mask, width, ways, keep, ways - keep));
}

void cpufreq_section(TomlOut& o, const GenHost& h, const HostPartition& part) {
  o.section("cpufreq");
  std::string driver = h.facts.capabilities ? h.facts.capabilities->cpufreq_driver : "";
  o.kv("governor", "\"performance\"",
       driver.empty() ? "every cpufreq driver offers it"
                      : fmt::format("{} offers it", clean(driver, 40)));
  o.kv("draft_freq", "\"max\"",
       "the draft's domain at its top clock: drafting is a latency chain" +
           max_freq(h, part.draft.cpus));
  o.kv("verify_freq", "\"max\"",
       "the target's domains at their top clock: a K-token verify pass is compute-bound" +
           max_freq(h, part.verify.cpus));
  o.kv("epp", "\"performance\"", "amd-pstate active only; other drivers skip it");
}

void prefetch_section(TomlOut& o, const GenHost& h) {
  o.section("prefetch");
  const auto& cpu = h.t.cpu;
  if (!h.gen.prefetch_control) {
    o.kv("enabled", "false",
         fmt::format("{}: no PrefetchControl MSR, and no other MSR is written on this family",
                     h.gen.name));
    return;
  }
  if (h.facts.capabilities && !cpu.prefetch_control) {
    o.kv("enabled", "false",
         "CPUID Fn8000_0021 EAX[13] is clear on this host (hypervisors hide it): the MSR is not "
         "there to write");
    return;
  }
  o.kv("enabled", "true",
       h.facts.capabilities ? "CPUID Fn8000_0021 EAX[13] set: PrefetchControl exists"
                            : fmt::format("{} has PrefetchControl; the step checks the CPUID bit "
                                          "on the host",
                                          h.gen.name));
  o.kv("msr", "0xC0000108", "PrefetchControl; a set bit disables a prefetcher");
  o.kv("mask", "0x2F",
       cpu.family == 0x1A ? "the five documented bits; Zen 5's bits 6-9 (reset 0x3C0) are "
                            "undocumented and kept as firmware set them"
                          : "L1Stream, L1Stride, L1Region, L2Stream, L2UpDown: the documented "
                            "bits");
  o.kv("value", "0x00", "every prefetcher on: the weights stream sequentially");
  o.kv("cpus", "\"inference\"", "draft and verify CPUs; housekeeping keeps firmware's setting");
}

void engine_sections(TomlOut& o) {
  o.section("weights");
  o.kv("layout", "\"interleave\"", "the target reads every weight per token: all nodes' channels");
  o.kv("hugepages", "true", "weights in the 2 MB pages reserved above");
  o.kv("launch_config", "\"/var/lib/epyctune/engine.toml\"", "where steps 7-8 write the plan");
  o.section("spec");
  o.kv("draft_source", "\"model\"", "a draft model on the draft partition");
  o.kv("draft_len", "8", "the adaptive draft length starts here");
  o.kv("draft_threads", "0", "0 = every draft CPU");
  o.kv("verify_threads", "0", "0 = every verify CPU");
  o.kv("launch_config", "\"/var/lib/epyctune/engine.toml\"", "the same file as [weights]");
  o.section("engine");
  o.kv("threads", "0", "0 = every CPU of the side");
  o.kv("draft_len", "8", "as [spec]");
  o.kv("kv_type", "\"f16\"", "half the KV cache bytes of f32");
}

void expectations_section(TomlOut& o, const GenHost& h) {
  auto mem = detail::memory_platform(h.t.cpu);
  if (!mem) return;
  double bw = mem->bandwidth_gbs() * h.t.sockets;
  double gb = h.target_bytes / 1e9;
  o.section("expectations");
  o.comment("An upper bound, not a claim or a measurement: theoretical bandwidth over the bytes a");
  o.comment("dense target reads per token (for an MoE target it is no bound).");
  o.kv("source",
       toml_string(fmt::format("roofline bound: {}{:.1f} GB/s / {:.2f} GB per token",
                               h.t.sockets > 1 ? fmt::format("{} x ", h.t.sockets) : "",
                               mem->bandwidth_gbs(), gb)),
       "");
  o.kv("model", toml_string(h.opt.target.path.empty() ? "7B Q4_0" : "the --model target"), "");
  double roofline = std::floor(bw / gb * 10.0) / 10.0;
  if (roofline < 1e6)  // the schema's ceiling; a toy model's bound means nothing anyway
    o.kv("roofline", fmt::format("{:.1f}", roofline), "tok/s");
  else
    o.comment(
        fmt::format("roofline not set: {:.0f} tok/s for so small a target says nothing", roofline));
}

}  // namespace epyctune::profile::detail
