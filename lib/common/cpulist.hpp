// Kernel CPU-list syntax ("0-3,8,10-11"), as used by sysfs, isolcpus and
// smp_affinity_list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::common {

// The highest CPU count accepted when no host says otherwise (planning for
// another machine): the kernel's largest NR_CPUS on x86 is 8192.
inline constexpr int kMaxCpusOffline = 8192;

// Sorted, de-duplicated. Every CPU id must be below `cpu_limit` (the host's
// CPU count, or kMaxCpusOffline), so a range such as "0-2147483647" fails
// before anything is allocated. Throws std::invalid_argument naming the bad
// token: one error per list, however many CPUs it names.
std::vector<int> parse_cpulist(std::string_view text, int cpu_limit = kMaxCpusOffline);
// Canonical, compressed form: {0,1,2,3,8} -> "0-3,8"; empty -> "".
std::string format_cpulist(const std::vector<int>& cpus);
// Kernel hex mask ("ff,ffffffff") <-> CPU list.
// Bits at or above `cpu_limit` are refused, like parse_cpulist's ids.
std::vector<int> parse_cpumask(std::string_view hex, int cpu_limit = kMaxCpusOffline);
std::string format_cpumask(const std::vector<int>& cpus);

}  // namespace epyctune::common
