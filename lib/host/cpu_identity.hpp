// Who made the CPU and which part it is. Decisions use vendor + family/model
// only: Debian 12's libcpuid (0.6.2) predates Zen 5 and names a family-1Ah EPYC
// "Athlon X2 (Kuma)", and VMs often show a bare "AMD EPYC" brand.
#pragma once

#include <string>
#include <string_view>

#include "host/sysroot.hpp"
#include "host/topology.hpp"

namespace epyctune::host {

// "zen3", "zen4", "zen4c", "zen5", "zen5c", "zen2", "zen", "unknown".
std::string microarch_for(const std::string& vendor, int family, int model);
// Our server codename table ("Milan", "Genoa", "Bergamo", "Turin", ...); "" if unknown.
std::string codename_for(const std::string& vendor, int family, int model);

// The first processor block of a /proc/cpuinfo text (no CPUID bits: prefetch_control false).
CpuIdentity parse_cpuinfo_identity(std::string_view cpuinfo);
// PrefetchControl (CPUID Fn8000_0021 EAX[13]) from a dump in hwloc-gather-cpuid
// format ("<eax> <ebx> <ecx> <edx> => <eax> <ebx> <ecx> <edx>" per line).
bool cpuid_dump_prefetch_control(std::string_view dump);

// Live: libcpuid + the CPUID instruction + /proc/cpuinfo flags.
// Sysroot: DIR/proc/cpuinfo, and DIR/cpuid/pu0 for PrefetchControl.
CpuIdentity identify_cpu(const Sysroot& root);

// An lstopo XML gives CPUVendor/CPUFamilyNumber/CPUModelNumber/CPUModel/
// CPUStepping when exported with the x86 backend; otherwise only CPUModel
// (the brand), from which the part is inferred for the EPYC parts we know.
CpuIdentity identity_from_hwloc_infos(const std::string& vendor, const std::string& family,
                                      const std::string& model, const std::string& stepping,
                                      const std::string& brand);

}  // namespace epyctune::host
