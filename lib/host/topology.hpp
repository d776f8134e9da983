// What the machine is: sockets, NUMA nodes, L3 domains (CCX; a CCD on Zen 3/4
// Genoa/Milan, half a CCD on Bergamo), cores and their SMT siblings, and the
// CPU's identity. Filled by discovery (hwloc + libcpuid + sysfs, see
// discover.hpp); plain data so plans can be computed for machines we are not on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epyctune::host {

struct CpuIdentity {
  std::string vendor;  // "AuthenticAMD"
  int family = 0;      // CPUID family incl. extended (0x19 = 25 Zen 3/4, 0x1A = 26 Zen 5)
  int model = 0;       // incl. extended model
  int stepping = 0;
  std::string brand;      // "AMD EPYC 9754 128-Core Processor" (VMs: often just "AMD EPYC")
  std::string codename;   // libcpuid's guess: a hint only, never used to decide
  std::string microarch;  // ours, from family/model: "zen3", "zen4", "zen4c", "zen5", "unknown"
  bool prefetch_control = false;  // CPUID Fn8000_0021 EAX[13]: MSR 0xC0000108 documented
  bool hypervisor = false;
  std::vector<std::string> flags;  // avx2, avx512f, avx512_vnni, ...
  std::string os_model_name;  // /proc/cpuinfo "model name" (may differ from CPUID's brand in VMs)
  // Where identity came from: "cpuid" (live: libcpuid + CPUID), "cpuinfo" (a
  // sysroot's /proc/cpuinfo), "hwloc-xml" (the XML's CPUVendor/CPUFamilyNumber
  // infos), "brand" (an XML without them: family/model inferred from the
  // brand's part number, known parts only).
  std::string source;

  bool has_flag(const std::string& f) const;
};

struct Core {
  int id = 0;  // index in the machine, 0..n_cores-1, in hwloc logical order
  int socket = 0;
  int numa_node = 0;      // OS node number
  int l3 = 0;             // index into Topology::l3_domains
  std::vector<int> cpus;  // OS CPU numbers (PUs); >1 with SMT on
};

struct L3Domain {
  int index = 0;     // position in Topology::l3_domains (logical order)
  int cache_id = 0;  // kernel's cpuN/cache/index3/id: the resctrl domain id
  int socket = 0;
  int numa_node = 0;
  uint64_t size_bytes = 0;
  std::vector<int> cores;  // Core::id
  std::vector<int> cpus;   // all PUs of those cores
  // The host reported no L3 (some VMs): the package stands in as one domain,
  // cache_id = package os index, size 0. Never a resctrl domain.
  bool synthetic = false;
};

struct NumaNode {
  int os_index = 0;
  int socket = 0;            // the first of `sockets`; -1 for a node without CPUs (CXL / HBM)
  std::vector<int> sockets;  // every socket its CPUs are on: >1 for NPS0 or no NUMA info
  uint64_t memory_bytes = 0;
  std::vector<int> cpus;
  bool on_socket(int s) const;
};

struct Topology {
  std::string source;  // "live", "sysroot:/path", "xml:/file.xml"
  CpuIdentity cpu;
  int sockets = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<L3Domain> l3_domains;
  std::vector<Core> cores;
  int threads_per_core = 1;
  std::vector<int> online_cpus;

  int n_cores() const { return static_cast<int>(cores.size()); }
  int n_cpus() const { return static_cast<int>(online_cpus.size()); }
  // NPS: CPU nodes / sockets (>= 1); 0 when a node spans sockets (AMD NPS0,
  // or an export without NUMA information).
  int nodes_per_socket() const;
  const NumaNode* node(int os_index) const;  // nullptr when absent
  std::vector<int> cpus_of_socket(int socket) const;
};

}  // namespace epyctune::host
