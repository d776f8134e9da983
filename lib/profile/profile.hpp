// A hardware profile: what machine it is for, how the machine is partitioned
// between draft, verify and housekeeping, and the parameters of every step of
// the stack. Loaded from TOML (loader.hpp), resolved against a Topology
// (resolve.hpp). This struct is the contract between profile/ and stack/.
#pragma once

#include <any>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace epyctune::profile {

// Where a value came from, for error messages and `profile show`.
struct Origin {
  std::string file;
  int line = 0;
  int column = 0;
};

struct Hardware {
  std::string vendor = "AuthenticAMD";
  int family = 0;              // 25 (0x19) or 26 (0x1A)
  std::vector<int> models;     // accepted CPUID models; empty = any
  std::string codename;        // "Bergamo", "Genoa", "Milan" (display)
  std::string brand_contains;  // e.g. "9754"; VMs hide it, so it only ranks
  int sockets = 1;
  int cores_per_socket = 0;
  int l3_domains_per_socket = 0;  // CCXs
  int ccds_per_socket = 0;
  int cores_per_l3 = 0;
  uint64_t l3_bytes = 0;            // per L3 domain
  int memory_channels = 0;          // per socket
  std::string memory_type;          // "DDR5-4800"
  double memory_bandwidth_gbs = 0;  // theoretical peak per socket
  std::vector<int> nps_supported;   // {1,2,4}
  std::vector<std::string> notes;   // facts about the part that are easy to get wrong
};

struct Partition {
  std::vector<int> draft_l3;            // L3 domain indices (Topology::l3_domains order)
  std::vector<int> verify_l3;           // empty = every domain not draft
  std::vector<int> housekeeping_cores;  // Core::id taken out of draft/verify for the OS
  // OS CPU numbers (profile key `housekeeping_cpus = "0-1,128-129"`); their
  // cores join housekeeping_cores when resolved.
  std::vector<int> housekeeping_cpus;
  bool use_smt_siblings = false;  // inference threads on both SMT siblings
};

struct BiosStep {
  int expect_nps = 1;
  std::string smt = "off";                  // "on" | "off" | "keep"
  std::string determinism = "performance";  // "performance" | "power" | "any" (check only)
  std::string boost = "on";                 // "on" | "off" | "keep"
};

struct NumaStep {
  bool numa_balancing = false;
  std::string thp = "madvise";  // "always" | "madvise" | "never" | "keep"
  // Per node 2 MB pages; "auto" sizing (-1) reserves for the model + KV cache.
  int64_t hugepages_2m_per_node = -1;
  int64_t hugepages_1g_per_node = 0;
  double model_gb = 0;  // what "auto" sizes for
  double hugepage_headroom = 1.10;
};

struct IsolationStep {
  bool isolate = true;  // isolcpus=managed_irq,domain,<draft+verify>
  bool nohz_full = true;
  bool rcu_nocbs = true;
  bool irq_affinity = true;  // IRQs to housekeeping CPUs
  std::string bootloader_dropin = "/etc/default/grub.d/epyctune.cfg";
};

struct CatStep {
  bool enabled = true;
  std::string draft_group = "epyctune-draft";
  std::string verify_group = "epyctune-verify";
  std::string draft_cbm = "all";  // hex mask or "all" (= info/L3/cbm_mask)
  std::string verify_cbm = "all";
  std::string default_cbm = "all";  // root group on inference domains
};

struct CpufreqStep {
  std::string governor = "performance";
  std::string draft_freq = "max";  // "max" | "min" | kHz number
  std::string verify_freq = "max";
  std::string epp = "performance";  // amd-pstate active only
};

struct ExtraMsr {
  uint32_t address = 0;
  uint64_t mask = 0;
  uint64_t value = 0;
  std::string reason;  // why the operator whitelisted it
};

// The PrefetchControl (0xC0000108) fields AMD documents for family 19h and
// 1Ah: L1Stream (bit 0), L1Stride (1), L1Region (2), L2Stream (3), L2UpDown
// (5); a set bit disables. Zen 5 resets the MSR to 0x3C0: bits 6-9 are fields
// whose meaning AMD has not published, so no profile may write them, and
// read-modify-write under the mask keeps what firmware put there.
inline constexpr uint64_t kPrefetchDocumentedBits = 0x2F;

struct PrefetchStep {
  bool enabled = true;
  uint32_t msr = 0xC0000108;       // PrefetchControl; a set bit disables
  uint64_t mask = 0x2F;            // bits 0,1,2,3,5
  uint64_t value = 0x00;           // all five prefetchers on
  std::string cpus = "inference";  // "inference" | "all"
  std::vector<ExtraMsr> extra;     // refused unless listed here
};

struct WeightsStep {
  std::string layout = "interleave";  // "interleave" | "split" | "local"
  bool hugepages = true;
  std::string launch_config = "/var/lib/epyctune/engine.toml";
};

struct SpecStep {
  std::string draft_source = "model";  // "model" | "lookup" | "cascade"
  int draft_len = 8;
  int draft_threads = 0;   // 0 = every draft CPU
  int verify_threads = 0;  // 0 = every verify CPU
  std::string launch_config = "/var/lib/epyctune/engine.toml";
};

struct EngineDefaults {
  int threads = 0;
  int draft_len = 8;
  std::string kv_type = "f16";
};

// Parameters of steps that keep them in their own file instead of a field of
// Profile, by section name (profile/section.hpp's extra()).
class ExtraSections {
 public:
  // Default-constructed on first use.
  template <class T>
  T& get(const std::string& section) {
    std::any& a = by_section_[section];
    if (!a.has_value()) a = T{};
    return std::any_cast<T&>(a);
  }
  // The defaults when the profile never set the section.
  template <class T>
  const T& get(const std::string& section) const {
    static const T defaults{};
    auto it = by_section_.find(section);
    return it == by_section_.end() ? defaults : std::any_cast<const T&>(it->second);
  }

 private:
  std::map<std::string, std::any> by_section_;
};

struct Profile {
  std::string name;                  // "epyc-9754"
  std::vector<std::string> aliases;  // {"9754"}
  std::string description;
  std::string source_file;
  Hardware hardware;
  Partition partition;
  BiosStep bios;
  NumaStep numa;
  IsolationStep isolation;
  CatStep cat;
  CpufreqStep cpufreq;
  PrefetchStep prefetch;
  WeightsStep weights;
  SpecStep spec;
  EngineDefaults engine;
  // Published tok/s per step ("baseline", "bios", "numa", ... "spec"), shown
  // next to what `bench` measures.
  std::map<std::string, double> expectations;
  std::string expectations_source;    // what the numbers are: a citation, or "roofline bound: ..."
  std::string expectations_model;     // the model they are for ("7B Q4_0")
  std::vector<std::string> includes;  // the include chain, outermost file first ("base" last)
  std::map<std::string, Origin> origins;  // dotted key -> where it was set
  ExtraSections extra;
};

}  // namespace epyctune::profile
